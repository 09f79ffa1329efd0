"""The noise rule of ``servelab compare`` as a pure function (the rule and why it is
so are written in ``reports/verdict.py``, which renders it). Kept here, low, so that
``scale``'s efficiency verdict applies the very same rule."""

from __future__ import annotations

from dataclasses import dataclass

NOISE_FLOOR = 0.10
TAIL_FACTOR = 2.0  # a latency's floor is this many times the floor
BETTER, WORSE, NOISE, UNKNOWN, SAME = "better", "worse", "within noise", "noise unknown", "same"


@dataclass(frozen=True, slots=True)
class Spread:
    """A metric over a config's repeats."""

    values: tuple[float, ...]

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float:
        return sum(self.values) / len(self.values)

    @property
    def lo(self) -> float:
        return min(self.values)

    @property
    def hi(self) -> float:
        return max(self.values)

    @property
    def half_range(self) -> float:
        return (self.hi - self.lo) / 2


def verdict(base: Spread, other: Spread, higher_is_better: bool, floor: float = NOISE_FLOOR) -> str:
    if base.n < 2 or other.n < 2:
        return UNKNOWN
    apart = other.lo > base.hi or other.hi < base.lo
    big = abs(other.mean - base.mean) > floor * abs(base.mean)
    if not (apart and big):
        return NOISE
    return BETTER if (other.mean > base.mean) == higher_is_better else WORSE
