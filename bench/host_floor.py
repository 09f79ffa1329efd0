"""Why no step of the form overhead + bytes / bandwidth holds small models at concurrency 1.

One author posted vLLM runs of the Qwen3 family on an A100, one request at a time, in one issue
(tenstorrent/tt-inference-server#340): Qwen3-0.6B and Qwen3-1.7B on 2025-06-24, Qwen3-14B on
2025-07-18. The 1.7B rows are held out in the corpus, the 14B rows are fit rows; the 0.6B rows are not
in the corpus (dated 2025-06-24 with a name before the 1.7B's, they would take its place in the split
and move it into the fit: planner/corpus/__init__.py). This prints:
- each size's mean TPOT, measured and predicted with the committed constants;
- the read each size adds over the one below it, and the bandwidth that read would need to fit in
  the measured difference (mean TPOT over the three workloads every size ran);
- the best any overhead and bandwidth can do over the three sizes (smallest worst error on those
  means, searched on a grid), fitted on those rows themselves.

Usage: .venv/bin/python bench/host_floor.py
"""

from __future__ import annotations

import statistics

from servelab.planner.corpus import Source, SpeedRow, Workload, load_corpus
from servelab.planner.corpus_replay import speed_engine
from servelab.planner.speed_model import concurrency1, fitted_speed, step_costs

URL = "https://github.com/tenstorrent/tt-inference-server/issues/340"
# Qwen3-0.6B on an A100, the comment of 2025-06-24: (input, output) -> mean TPOT ms
SMALL = {(128, 128): 4.2, (128, 1024): 4.2, (1024, 128): 4.4}
SIZES = (("Qwen/Qwen3-0.6B", "tt340-0.6b"), ("Qwen/Qwen3-1.7B", "tt340a-"), ("Qwen/Qwen3-14B", "tt340b-"))


def series() -> list[tuple[str, float, list[tuple[SpeedRow, float]]]]:
    """(model, bytes read per decode step, [(row, predicted TPOT ms)]) for each size."""
    corpus, constants = load_corpus(), fitted_speed()
    out = []
    for model, prefix in SIZES:
        if model.endswith("0.6B"):
            rows = [SpeedRow(f"{prefix}-{i}-{o}-c1", Source(URL, "2025-06-24", "not stated"), model, "A100",
                             Workload("fixed", i, o, 4, max_concurrency=1), {"mean_tpot_ms": tpot})
                    for (i, o), tpot in SMALL.items()]
        else:
            rows = [r for r in corpus.speed if r.id.startswith(prefix) and "mean_tpot_ms" in r.measured]
        engine = speed_engine(rows[0])
        costs = step_costs(engine, constants)
        predicted = [concurrency1(costs, engine, r.workload.input_len, r.workload.output_len)["mean_tpot_ms"]
                     for r in rows]
        out.append((model, engine.weight_bytes, list(zip(rows, predicted))))
    return out


def best_additive(points: list[tuple[float, float]]) -> tuple[float, float, float]:
    """(worst relative error, overhead ms, GB/s) of the overhead + bytes / bandwidth line with the
    smallest worst error over ``points`` (bytes, TPOT ms): a grid, 0.1 ms by 0.001 ms/GB."""
    best = (float("inf"), 0.0, 0.0)
    for overhead in (i / 10 for i in range(80)):
        for slope in (j / 1000 for j in range(200, 2000)):
            worst = max(abs(overhead + slope * gb / 1e9 - ms) / ms for gb, ms in points)
            if worst < best[0]:
                best = (worst, overhead, 1e3 / slope)
    return best


def main() -> int:
    rows = series()
    print(f"Qwen3 on one A100, one request at a time ({URL}); predicted with the committed constants\n")
    print("| model | read per step | input -> output | measured TPOT | predicted | error |")
    print("|---|---|---|---|---|---|")
    for model, read, pairs in rows:
        for row, predicted in pairs:
            measured = row.measured["mean_tpot_ms"]
            print(f"| {model} | {read / 1e9:.2f} GB | {row.workload.input_len} -> {row.workload.output_len} | "
                  f"{measured:.1f} ms | {predicted:.2f} ms | {predicted / measured - 1:+.1%} |")
    # means over the workloads every size ran, so the sizes are compared on the same lengths
    means = [(read, statistics.mean(r.measured["mean_tpot_ms"] for r, _ in pairs
                                    if (r.workload.input_len, r.workload.output_len) in SMALL))
             for _, read, pairs in rows]
    print()
    for (read0, ms0), (read1, ms1), (model, _, _) in zip(means, means[1:], rows[1:]):
        print(f"{model}: {(read1 - read0) / 1e9:+.2f} GB read, {ms1 - ms0:+.2f} ms mean TPOT: "
              f"{(read1 - read0) / (ms1 - ms0) / 1e9:.2f} TB/s would be needed (A100-80GB datasheet: 2.04)")
    worst, overhead, bandwidth = best_additive(means)
    print(f"\nbest overhead + bytes / bandwidth over the three means: {overhead:.1f} ms + "
          f"{bandwidth:.0f} GB/s, worst error {worst:.1%} (fitted on these means themselves)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
