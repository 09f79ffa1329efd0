"""Where more load stops buying throughput: the knee of the load ladder.

Rule (stated in every report): walking up the ladder, point i *saturates* when
  - it has failed requests, or
  - throughput grew less than ``min_gain`` (default 5 %) over point i−1 while the
    latency watched (default median E2EL) grew more than ``max_latency_growth``
    (default 20 %).
The operating point is the point before the first saturating one: the most load
that still bought throughput at a latency that had not yet run away. A ladder
with no saturating point is "not saturated" up to its last load.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from servelab.search.points import Point


@dataclass(frozen=True, slots=True)
class Knee:
    operating_index: int | None  # None: the first point already saturates (or no points)
    saturated_index: int | None  # None: not saturated within the ladder
    reason: str

    @property
    def saturated(self) -> bool:
        return self.saturated_index is not None


def rule_text(min_gain: float, max_latency_growth: float, latency_key: str) -> str:
    return (f"saturated when a step adds < {min_gain:.0%} throughput while {latency_key} grows "
            f"> {max_latency_growth:.0%}, or requests fail; operating point = the step before")


def step_saturates(prev: Point, cur: Point, min_gain: float, max_growth: float, key: str) -> str | None:
    """Why ``cur`` saturates relative to ``prev``, or None."""
    if cur.errors > 0:
        return f"{cur.errors} failed requests at load {cur.load:g}"
    gain = cur.throughput / prev.throughput - 1 if prev.throughput > 0 else float("inf")
    growth = cur.latency(key) / prev.latency(key) - 1 if prev.latency(key) > 0 else 0.0
    if gain < min_gain and growth > max_growth:
        return (f"load {prev.load:g} → {cur.load:g}: throughput {gain:+.1%}, "
                f"{key} {growth:+.1%}")
    return None


def find_knee(points: list[Point], min_gain: float = 0.05, max_latency_growth: float = 0.20,
              latency_key: str = "median_e2el") -> Knee:
    pts = sorted(points, key=lambda p: p.load)
    if not pts:
        return Knee(None, None, "no points")
    if pts[0].errors > 0:
        return Knee(None, 0, f"{pts[0].errors} failed requests at the lowest load {pts[0].load:g}")
    for i in range(1, len(pts)):
        why = step_saturates(pts[i - 1], pts[i], min_gain, max_latency_growth, latency_key)
        if why:
            return Knee(i - 1, i, why)
    return Knee(len(pts) - 1, None, f"not saturated up to load {pts[-1].load:g}")


def climb(measure: Callable[[float], Point], ladder: list[float], min_gain: float = 0.05,
          max_latency_growth: float = 0.20, latency_key: str = "median_e2el") -> list[Point]:
    """Measure the ladder bottom up; stop at the first point that saturates (more load
    past a knee only buys latency, and a run there is the slowest of the sweep)."""
    points: list[Point] = []
    for load in ladder:
        points.append(measure(load))
        if find_knee(points, min_gain, max_latency_growth, latency_key).saturated:
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
