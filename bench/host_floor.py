"""Why no step of the form overhead + bytes / bandwidth holds small models at concurrency 1.

One author posted vLLM runs of the Qwen3 family on an A100 (40 or 80 GB not stated), one request at
a time, in one issue (tenstorrent/tt-inference-server#340): Qwen3-0.6B and Qwen3-1.7B on 2025-06-24,
Qwen3-14B on 2025-07-18. The 1.7B rows are held out in the corpus, the 14B rows are fit rows. The
0.6B rows are not in the corpus: dated 2025-06-24 with a name before the 1.7B's, they would take that
group's position in the split and shift every later group by one (planner/corpus/__init__.py).
This prints:
- each size's mean TPOT, measured and predicted with the committed constants;
- the read each size adds over the one below it, and the bandwidth that read would need to fit in
  the measured difference (mean TPOT over the three workloads every size ran), beside the
  A100-80GB's datasheet, the higher of the two A100s;
- the overhead + bytes / bandwidth line with the smallest worst relative error over those means,
  solved exactly (``best_additive``): fitted on these rows themselves, the best any constants of
  that form can do.

Usage: .venv/bin/python bench/host_floor.py
"""

from __future__ import annotations

import itertools
import statistics

import numpy as np

from servelab.planner.corpus.rows import Source, SpeedRow, Workload, load_corpus
from servelab.planner.corpus.replay import speed_engine
from servelab.planner.gpus import find_gpu
from servelab.planner.speed_model import concurrency1, fitted_speed, step_costs

URL = "https://github.com/tenstorrent/tt-inference-server/issues/340"
# Qwen3-0.6B on an A100, the comment of 2025-06-24: (input, output) -> (requests, mean TPOT ms)
SMALL = {(128, 128): (8, 4.2), (128, 1024): (4, 4.2), (1024, 128): (4, 4.4)}
SIZES = (("Qwen/Qwen3-0.6B", "tt340-0.6b"), ("Qwen/Qwen3-1.7B", "tt340a-"), ("Qwen/Qwen3-14B", "tt340b-"))


def series() -> list[tuple[str, float, list[tuple[SpeedRow, float]]]]:
    """(model, weight bytes read per decode step, [(row, predicted TPOT ms)]) for each size."""
    corpus, constants = load_corpus(), fitted_speed()
    out = []
    for model, prefix in SIZES:
        if model.endswith("0.6B"):
            rows = [SpeedRow(f"{prefix}-{i}-{o}-c1", Source(URL, "2025-06-24", "not stated"), model, "A100",
                             Workload("fixed", i, o, n, max_concurrency=1), {"mean_tpot_ms": tpot})
                    for (i, o), (n, tpot) in SMALL.items()]
        else:
            rows = [r for r in corpus.speed if r.id.startswith(prefix) and "mean_tpot_ms" in r.measured]
        engine = speed_engine(rows[0])
        costs = step_costs(engine, constants)
        predicted = [concurrency1(costs, engine, r.workload.input_len, r.workload.output_len)["mean_tpot_ms"]
                     for r in rows]
        out.append((model, engine.weight_bytes, list(zip(rows, predicted))))
    return out


def means(sizes) -> list[tuple[float, float]]:
    """(bytes, mean TPOT ms) per size over the workloads of ``SMALL``, which every size ran, so the
    sizes are compared on the same lengths."""
    out = []
    for model, read, pairs in sizes:
        shared = [r.measured["mean_tpot_ms"] for r, _ in pairs if (r.workload.input_len, r.workload.output_len) in SMALL]
        if len(shared) != len(SMALL):
            raise ValueError(f"{model}: {len(shared)} of the {len(SMALL)} shared workloads")
        out.append((read, statistics.mean(shared)))
    return out


def best_additive(points: list[tuple[float, float]]) -> tuple[float, float, float]:
    """(worst relative error, overhead ms, GB/s) of the line ms = overhead + bytes / bandwidth with the
    smallest worst relative error over ``points`` (bytes, ms). A best line of two unknowns meets its
    worst error at three points with alternating signs, so each triple and each sign pattern is
    solved exactly (o + s x_i - sign_i m_i e = m_i) and the candidate whose worst error over every
    point is smallest is kept."""
    best = (float("inf"), 0.0, 0.0)
    ordered = sorted(points)
    for triple in itertools.combinations(ordered, 3):
        for first in (1.0, -1.0):
            signs = (first, -first, first)
            a = np.array([[1.0, x / 1e9, -s * m] for (x, m), s in zip(triple, signs)])
            try:
                overhead, slope, _ = np.linalg.solve(a, np.array([m for _, m in triple]))
            except np.linalg.LinAlgError:
                continue
            if slope <= 0:
                continue
            worst = max(abs(overhead + slope * x / 1e9 - m) / m for x, m in ordered)
            if worst < best[0]:
                best = (float(worst), float(overhead), float(1e3 / slope))
    return best


def main() -> int:
    sizes = series()
    print(f"Qwen3 on an A100, one request at a time ({URL}); predicted with the committed constants\n")
    print("| model | read per step | input -> output | measured TPOT | predicted | error |")
    print("|---|---|---|---|---|---|")
    for model, read, pairs in sizes:
        for row, predicted in pairs:
            measured = row.measured["mean_tpot_ms"]
            print(f"| {model} | {read / 1e9:.2f} GB | {row.workload.input_len} -> {row.workload.output_len} | "
                  f"{measured:.1f} ms | {predicted:.2f} ms | {predicted / measured - 1:+.1%} |")
    points = means(sizes)
    datasheet = find_gpu("A100-80GB").bandwidth_gbs / 1e3
    print()
    for (read0, ms0), (read1, ms1), (model, _, _) in zip(points, points[1:], sizes[1:]):
        print(f"{model}: {(read1 - read0) / 1e9:+.2f} GB read, {ms1 - ms0:+.2f} ms mean TPOT: "
              f"{(read1 - read0) / (ms1 - ms0) / 1e9:.2f} TB/s would be needed (A100-80GB datasheet: {datasheet:.2f})")
    worst, overhead, bandwidth = best_additive(points)
    print(f"\nbest overhead + bytes / bandwidth over the three means: {overhead:.2f} ms + "
          f"{bandwidth:,.0f} GB/s, worst error {worst:.1%} (fitted on these means themselves)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
