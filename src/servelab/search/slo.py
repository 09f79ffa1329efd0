"""The most load that meets a latency SLO — bracketed, then bisected.

A point *meets* the SLO when each named latency statistic (default p99 of TTFT,
TPOT, E2EL, as given) is at or below its limit and no request failed.

Search: walk the ladder up until a point fails (bracket [last pass, first
fail]); then bisect that bracket (integers for concurrency) until it is within
``rel_tol`` or ``max_bisect`` more runs are spent. The answer is the highest
load *measured* to meet the SLO, plus a linear interpolation between the bracket
ends of where the tightest latency crosses its limit (an estimate, labelled so).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from servelab.search.points import Point


# How a limit's name is spelled (each kept as it was printed before one home held them): as
# its key (``p99_ttft``: the rules, optimize's report), as words (``p99 ttft``: optimize's
# operating point), as the metric (``p99 TTFT``: tune --simulate's table).
SPELLINGS = {"key": lambda k: k, "words": lambda k: k.replace("_", " "),
             "metric": lambda k: f"{k.split('_', 1)[0]} {k.split('_', 1)[1].upper()}"}


def text(limits: dict[str, float], spelling: str = "key") -> str:
    """The one SLO text: {"p99_ttft": 500} -> "p99_ttft ≤ 500 ms", limits joined by ", "."""
    name = SPELLINGS[spelling]
    return ", ".join(f"{name(k)} ≤ {v:g} ms" for k, v in limits.items())


@dataclass(frozen=True, slots=True)
class SLOResult:
    status: str  # "met" | "none-meets" | "all-meet"
    best: Point | None  # highest load measured to meet the SLO
    first_fail: Point | None
    interpolated_load: float | None
    evidence: tuple[Point, ...]
    rule: str


def parse_slo(text: str, statistic: str = "p99") -> dict[str, float]:
    """``ttft:500,tpot:50`` -> {"p99_ttft": 500.0, "p99_tpot": 50.0}."""
    from servelab.errors import InputError

    out = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        name, sep, value = item.partition(":")
        if not sep or name not in ("ttft", "tpot", "itl", "e2el"):
            raise InputError(f"--slo: expected ttft:MS,tpot:MS,e2el:MS, got {item!r}")
        try:
            out[f"{statistic}_{name}"] = float(value)
        except ValueError:
            raise InputError(f"--slo: {name} limit must be a number of ms, got {value!r}") from None
    if not out:
        raise InputError("--slo: give at least one limit, e.g. ttft:500")
    return out


def meets(p: Point, limits: dict[str, float]) -> bool:
    return p.errors == 0 and all(p.latency(k) <= v for k, v in limits.items())


def _headroom(p: Point, limits: dict[str, float]) -> float:
    """Smallest limit/value ratio − 1 (≥ 0 meets, < 0 fails): the tightest SLO."""
    return min(v / p.latency(k) - 1 if p.latency(k) > 0 else math.inf for k, v in limits.items())


def binding(p: Point, limits: dict[str, float]) -> str:
    """The limit closest to (or furthest past) its bound at ``p``: the one that decides."""
    return min(limits, key=lambda k: limits[k] / p.latency(k) if p.latency(k) > 0 else math.inf)


def interpolate(lo: Point, hi: Point, limits: dict[str, float]) -> float:
    a, b = _headroom(lo, limits), _headroom(hi, limits)
    if not (math.isfinite(a) and math.isfinite(b)) or a == b:
        return lo.load
    return lo.load + (hi.load - lo.load) * a / (a - b)


def search(measure: Callable[[float], Point], ladder: list[float], limits: dict[str, float],
           integer: bool = True, rel_tol: float = 0.1, max_bisect: int = 4) -> SLOResult:
    rule = "meets = no failures and " + text(limits)
    seen: list[Point] = []
    lo = hi = None
    for load in ladder:
        p = measure(load)
        seen.append(p)
        if not meets(p, limits):
            hi = p
            break
        lo = p
    if hi is None:
        return SLOResult("all-meet", lo, None, None, tuple(seen), rule)
    if lo is None:
        return SLOResult("none-meets", None, hi, None, tuple(seen), rule)
    lo, hi = _bisect(measure, lo, hi, limits, integer, rel_tol, max_bisect, seen)
    return SLOResult("met", lo, hi, interpolate(lo, hi, limits), tuple(seen), rule)


def _bisect(measure, lo: Point, hi: Point, limits, integer: bool, rel_tol: float, budget: int, seen: list):
    for _ in range(budget):
        if hi.load <= lo.load * (1 + rel_tol) or (integer and hi.load - lo.load <= 1):
            break
        mid = (lo.load + hi.load) / 2
        mid = math.floor(mid) if integer else mid
        p = measure(mid)
        seen.append(p)
        lo, hi = (p, hi) if meets(p, limits) else (lo, p)
    return lo, hi
