"""The same author's Qwen3 series on one A100 at concurrency 1, and the best overhead + bytes /
bandwidth line through it (bench/host_floor.py prints it; docs/planner.md, "Where the TPOT target
stops"). The 0.6B rows are not corpus rows: dated 2025-06-24 with a name before the 1.7B's, they
would take that group's position in the split and shift every later group by one (``rows``)."""

from __future__ import annotations

import itertools
import statistics

import numpy as np

from servelab.planner.corpus.replay import speed_engine
from servelab.planner.corpus.rows import Source, SpeedRow, Workload, load_corpus
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
