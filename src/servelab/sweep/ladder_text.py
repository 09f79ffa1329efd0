"""What a load sweep shows: its points table (marked with the operating point, the saturated
load and the SLO's answer), the verdict lines under it, and the one-line summary of each
point as it is measured.

Text only, from a ``ladder.SweepOutcome`` (``outcome``) and its ``SweepPlan`` (``plan``),
read by their fields; apart from ``ladder.py`` (which measures the points and writes
``sweep.json``, whose "verdict" is these lines) so that the measuring and the wording
change apart. This module imports nothing of ``ladder.py``: ``ladder.py`` imports it.
(``sweep/report.py`` is tune's report, not the sweep's.)
"""

from __future__ import annotations

from servelab.search.knee import rule_text
from servelab.search.points import Point
from servelab.search.slo import SLOResult, binding
from servelab.search.table import points_table


def point_line(p: Point, latency_key: str) -> str:
    return (f"{p.throughput:.1f} out tok/s, {p.request_throughput:.2f} req/s, p99 TTFT "
            f"{p.latency('p99_ttft'):.0f} ms, {latency_key} {p.latency(latency_key):.0f} ms, {p.errors} errors")


def marks(outcome) -> dict[float, str]:
    """Notes for the table: the operating point, the saturated one, the SLO's answer."""
    out: dict[float, list[str]] = {}
    if outcome.operating is not None:
        out.setdefault(outcome.operating.load, []).append("operating point")
    if outcome.saturated_at is not None:
        out.setdefault(outcome.saturated_at.load, []).append("saturated")
    if outcome.slo and outcome.slo.best:
        out.setdefault(outcome.slo.best.load, []).append("most load meeting SLO")
    return {load: ", ".join(notes) for load, notes in out.items()}


def table(outcome) -> str:
    return points_table(outcome.points, outcome.plan.load_name, marks(outcome), goodput=bool(outcome.plan.slo))


def verdict_lines(outcome) -> list[str]:
    plan = outcome.plan
    lines = [f"knee rule: {rule_text(plan.min_gain, plan.max_latency_growth, plan.latency_key)}"]
    p = outcome.operating
    if p is not None:
        lines.append(f"operating point: {plan.load_name} {p.load:g} — {point_line(p, plan.latency_key)}")
    elif outcome.judged:
        lines.append("operating point: none — the lowest load already saturates")
    lines.append(_saturation_line(outcome))
    if outcome.over_saturated is not None:
        lines.append(f"stopped: {plan.load_name} {outcome.over_saturated:g} was judged over-saturated "
                     "(--stop-when-saturated: outstanding requests and TTFT both rising, 95 % one-sided)")
    if outcome.slo is not None:
        lines += slo_lines(outcome.slo, plan.load_name, plan.slo or {}, further(plan))
    if outcome.not_run:
        lines.append(f"not run: {plan.load_name} {', '.join(f'{x:g}' for x in outcome.not_run)} of the ladder — "
                     f"{outcome.not_run_why}")
    return lines


def further(plan) -> str:
    """How to look past the top load, in the flag the user gave for the ladder."""
    return "add a higher load to --loads" if plan.ladder_flag == "--loads" else f"raise {plan.ladder_flag}"


def _saturation_line(outcome) -> str:
    k, name = outcome.knee, outcome.plan.load_name
    if not k.saturated and not outcome.judged:
        if outcome.over_saturated is not None:
            return (f"knee: not reached — the ladder stopped at {name} {outcome.over_saturated:g} (judged "
                    "over-saturated) before any step saturated by the knee rule")
        return (f"knee: not reached — the SLO search stopped at {name} {outcome.ladder_points[-1].load:g} "
                "before any step saturated (run without --slo to find it)")
    if not k.saturated:  # "not saturated" only while the top load is the best by more than min_gain
        verdict = "not saturated" if k.climbing else "no knee"
        return f"{verdict}: {k.reason} ({further(outcome.plan)} to look further)"
    return f"saturated at {name} {outcome.saturated_at.load:g}: {k.reason}"


def slo_lines(r: SLOResult, load_name: str, limits: dict[str, float], more: str = "raise --stop") -> list[str]:
    loads = ", ".join(f"{p.load:g}" for p in r.evidence)
    lines = [f"SLO: {r.rule}"]
    if r.status == "none-meets":
        key = binding(r.first_fail, limits)
        lines.append(f"SLO: no load meets it — at the lowest, {load_name} {r.first_fail.load:g}: "
                     f"{_limit_text(r.first_fail, key, limits)}")
    elif r.status == "all-meet":
        lines.append(f"SLO: every load meets it, up to {load_name} {r.best.load:g} "
                     f"(tightest: {_limit_text(r.best, binding(r.best, limits), limits)}); {more}")
    else:
        key = binding(r.first_fail, limits)
        lines.append(f"SLO: most load that meets it: {load_name} {r.best.load:g} (measured), "
                     f"≈{r.interpolated_load:.1f} interpolated; {load_name} {r.first_fail.load:g} fails: "
                     f"{_limit_text(r.first_fail, key, limits)}")
    lines.append(f"SLO evidence: {len(r.evidence)} runs at {load_name} {loads}")
    return lines


def _limit_text(p: Point, key: str, limits: dict[str, float]) -> str:
    sign = "≤" if p.latency(key) <= limits[key] else ">"
    return f"{key} {p.latency(key):.0f} ms {sign} {limits[key]:g}"
