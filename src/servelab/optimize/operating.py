"""The operating point of the best configuration: push the client's concurrency up a
doubling ladder until more load buys latency and not throughput (``search.knee``, the
rule ``servelab sweep`` states), or, with an SLO, to the most load that still meets it.

One run per load (the knee rule compares neighbours, not repeats), each counted in the
budget; the ladder stops early at the knee, at the budget, or at the number of prompts
(more concurrency than requests is no more load).
"""

from __future__ import annotations

import dataclasses
import math

from servelab.optimize.steps import Seen
from servelab.search.knee import climb, find_knee, geometric_ladder, rule_text
from servelab.search.points import Point, point_from_result
from servelab.search.slo import meets, text as slo_text

LATENCY_KEY = "median_e2el"


def operating_point(state, best: Seen) -> dict | None:
    plan = state.plan
    if math.isfinite(plan.spec.load.request_rate):
        state.record["limits"].append("the operating point is swept over concurrency only at --request-rate inf; "
                                      "with a finite rate, `servelab sweep --over rate` finds it")
        return None
    top = plan.spec.dataset.num_prompts
    start = 1 if best.config.max_concurrency is None else max(1, best.config.max_concurrency // 4)
    ladder = _Ladder(state, best)
    try:
        climb(ladder, geometric_ladder(start, top), latency_key=LATENCY_KEY, limits=plan.slo)
    except _BudgetSpent:
        state.record["limits"].append(f"the operating point's ladder stopped at the run budget "
                                      f"({len(ladder.points)} loads measured)")
    return _chosen(plan, ladder.points, ladder.rows)


class _BudgetSpent(Exception):
    """The next load's run would pass --budget-runs: the ladder ends here."""


class _Ladder:
    """load -> Point: one run of the best configuration at that client concurrency, counted in
    the budget (a load measured before, the best's own, is read back free); keeps each row."""

    def __init__(self, state, best: Seen) -> None:
        self.state, self.best = state, best
        self.points: list[Point] = []
        self.rows: list[dict] = []

    def __call__(self, load: float) -> Point:
        state, budget = self.state, self.state.record["budget"]
        if state.plan.budget_runs is not None and budget["runs_used"] + 1 > state.plan.budget_runs:
            raise _BudgetSpent
        m = state.measurer.measure(dataclasses.replace(self.best.config, max_concurrency=int(load)), 1)
        budget["runs_used"] += m.fresh
        point = point_from_result(load, m.results[0])
        self.points.append(point)
        again = {} if m.fresh else {"reused": True}  # read back: this definition measured it before
        self.rows.append({"load": load, "output_tok_s": round(point.throughput, 3), "run": m.runs[0],
                          **_means(m.results[0]), **again})
        state.say(f"operating point: concurrency {load:g}: {point.throughput:.1f} out tok/s"
                  + (f" (reused: {m.runs[0]}, measured before)" if again else ""))
        return point


def _means(result: dict) -> dict:
    return {"mean_ttft_ms": round(float(result.get("mean_ttft_ms") or 0.0), 3),
            "mean_tpot_ms": round(float(result.get("mean_tpot_ms") or 0.0), 3)}


def _chosen(plan, points: list[Point], rows: list[dict]) -> dict | None:
    if not points:
        return None
    if plan.slo:
        fine = [i for i, p in enumerate(points) if meets(p, plan.slo)]
        if not fine:
            return _point(rows, None, "no load on the ladder meets the SLO")
        why = f"the most load on the ladder that meets every SLO ({slo_text(plan.slo, 'words')})"
        return _point(rows, fine[-1], why)
    knee = find_knee(points, latency_key=LATENCY_KEY)
    if knee.operating_index is None:
        return _point(rows, None, knee.reason)
    return _point(rows, knee.operating_index, f"{knee.reason}. Rule: {rule_text(0.05, 0.20, LATENCY_KEY)}")


def _point(rows: list[dict], i: int | None, why: str) -> dict:
    at = rows[i] if i is not None else {"load": None, "output_tok_s": None, "mean_ttft_ms": None,
                                          "mean_tpot_ms": None}
    return {"over": "concurrency", "load": at["load"], "output_tok_s": at["output_tok_s"],
            "mean_ttft_ms": at["mean_ttft_ms"], "mean_tpot_ms": at["mean_tpot_ms"], "why": why, "points": rows}

