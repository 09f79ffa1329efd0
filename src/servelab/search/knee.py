"""Where more load stops buying throughput: the knee over every measured point.

Rule (stated in every report, see ``rule_text``), over every point measured — the
ladder's and an SLO bisection's alike — in load order:
  - a load with failed requests is never an operating point: the first one saturates,
    and nothing above it counts;
  - ``best`` is the highest output tok/s measured below that load;
  - the operating point is the lowest load whose output tok/s is within ``min_gain``
    (default 5 %) of ``best``, provided the latency watched (default median E2EL) is
    higher at the next measured load — more load there bought latency, not throughput;
    a load whose next is no slower is passed over for the next one within 5 %;
  - it saturates at that next load when the latency grew more than
    ``max_latency_growth`` (default 20 %) from the operating point to the highest load
    still within 5 % of ``best`` (the plateau's end), or when that next load fails;
  - "not saturated" only when the highest load measured is also the best, by more than
    ``min_gain`` over every lower one: the curve still climbs where the sweep stopped.
Why every point: judging only the ladder (4, 16, 64) while bisection had measured 28,
34, 37, 40 named 64 the operating point of a curve flat at 2,499.7 tok/s from 34 on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from servelab.search.points import Point
from servelab.search.slo import meets


@dataclass(frozen=True, slots=True)
class Knee:
    operating_index: int | None  # None: the lowest load already fails (or no points)
    saturated_index: int | None  # None: not saturated within the points measured
    reason: str
    climbing: bool = False  # the highest load is the best by more than min_gain: "not saturated"

    @property
    def saturated(self) -> bool:
        return self.saturated_index is not None


def rule_text(min_gain: float, max_latency_growth: float, latency_key: str) -> str:
    return (f"operating point = the lowest load whose output tok/s is within {min_gain:.0%} of the best at any "
            f"load measured, if {latency_key} is higher at the next load; saturated there if {latency_key} "
            f"grows > {max_latency_growth:.0%} across the loads within {min_gain:.0%}, or requests fail")


def find_knee(points: list[Point], min_gain: float = 0.05, max_latency_growth: float = 0.20,
              latency_key: str = "median_e2el") -> Knee:
    pts = sorted(points, key=lambda p: p.load)
    if not pts:
        return Knee(None, None, "no points")
    ok = next((i for i, p in enumerate(pts) if p.errors > 0), len(pts))  # the loads below the first failure
    if ok == 0:
        return Knee(None, 0, f"{pts[0].errors} failed requests at the lowest load {pts[0].load:g}")
    best = max(p.throughput for p in pts[:ok])
    near = [i for i in range(ok) if pts[i].throughput >= (1 - min_gain) * best]  # the plateau, as measured
    op = next((i for i in near if i + 1 < len(pts) and _costs_more(pts[i], pts[i + 1], latency_key)), None)
    if op is None:
        return _no_knee(pts, near, min_gain, latency_key)
    return _plateau(pts, op, max(near[-1], op + 1), (min_gain, max_latency_growth, latency_key))


def _costs_more(cur: Point, nxt: Point, key: str) -> bool:
    """Did the next measured load cost latency (or fail)? Then ``cur`` is where more load stops paying."""
    return nxt.errors > 0 or nxt.latency(key) > cur.latency(key)


def _plateau(pts: list[Point], op: int, end: int, rule: tuple[float, float, str]) -> Knee:
    """The operating point ``op``; saturated at the next load if it fails, or if latency grew past the
    limit from ``op`` to ``end`` (the highest load within min_gain of the best, at least the next)."""
    min_gain, max_growth, key = rule
    nxt, cur = pts[op + 1], pts[op]
    if nxt.errors > 0:
        return Knee(op, op + 1, f"{nxt.errors} failed requests at load {nxt.load:g}")
    growth = pts[end].latency(key) / cur.latency(key) - 1 if cur.latency(key) > 0 else 0.0
    span = (f"load {cur.load:g} → {pts[end].load:g}: throughput within {min_gain:.0%} of the best "
            f"({max(p.throughput for p in pts[:end + 1]):,.1f} out tok/s), {key} {growth:+.1%}")
    if growth > max_growth:
        return Knee(op, op + 1, span)
    return Knee(op, None, f"{span}, not > {max_growth:.0%}")


def _no_knee(pts: list[Point], near: list[int], min_gain: float, key: str) -> Knee:
    """No load within min_gain of the best was followed by a slower one: the operating point is the
    highest of them; "not saturated" only when it is the top load and alone near the best."""
    top = len(pts) - 1
    if near == [top]:
        return Knee(top, None, f"load {pts[top].load:g}, the highest, is the best throughput, by more than "
                               f"{min_gain:.0%} over every lower load", climbing=True)
    low, high = pts[near[0]].load, pts[near[-1]].load
    return Knee(near[-1], None, f"load {low:g} → {high:g}: throughput within {min_gain:.0%} of the best, "
                                f"and {key} does not rise with load")


def climb(measure: Callable[[float], Point], ladder: list[float], min_gain: float = 0.05,
          max_latency_growth: float = 0.20, latency_key: str = "median_e2el",
          limits: dict[str, float] | None = None) -> list[Point]:
    """Measure the ladder bottom up; stop at the first point that saturates (more load
    past a knee only buys latency, and a run there is the slowest of the sweep) — or, with
    ``limits`` (an SLO), at the first that misses them. A ``measure`` that knows a budget
    ends the climb early by raising."""
    points: list[Point] = []
    for load in ladder:
        points.append(measure(load))
        over = not meets(points[-1], limits) if limits else \
            find_knee(points, min_gain, max_latency_growth, latency_key).saturated
        if over:
            break
    return points


def geometric_ladder(start: float, stop: float, factor: float = 2.0, integer: bool = True) -> list[float]:
    """start, start·f, start·f², … ≤ stop (stop itself included)."""
    out, x = [], float(start)
    while x < stop * (1 - 1e-9):
        out.append(round(x) if integer else x)
        x *= factor
    out.append(round(stop) if integer else float(stop))
    return sorted(set(out))
