"""Is a series rising? The over-saturation test behind ``--stop-when-saturated``.

A server past its capacity admits work more slowly than it arrives: the requests
outstanding at the client (released, not yet answered) grow without bound, and so does
each new request's TTFT (it waits behind them). A server below capacity holds both
level, however noisy. So the test is on the *trend*, not on a level:

    slope b of the ordinary least-squares line y = a + b·t over the window, its
    standard error se(b) = sqrt(Σr² / (n − 2) / Σ(t − t̄)²), and the one-sided
    95 % bound b − t₀.₉₅(n − 2) · se(b). The series is *rising* when that bound is
    above zero (the 95 % interval excludes a flat or falling line) **and** the rise the
    line fits over the window, b · span, is at least ``MIN_RISE`` of the window's mean:
    a statistically certain but tiny drift (samples taken 0.1 s apart are correlated,
    which makes se(b) optimistic) is not saturation.

Pure: samples in, a verdict out. The sampling (what, how often, which window) is
loadgen/watch.py's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MIN_RISE = 0.10  # the fitted rise over the window, as a fraction of the window's mean
# one-sided 95 % quantiles of Student's t by degrees of freedom (t₀.₉₅(df)); past the
# table the normal's 1.645 (the table's last entry is within 2 % of it)
_T95 = {1: 6.314, 2: 2.920, 3: 2.353, 4: 2.132, 5: 2.015, 6: 1.943, 7: 1.895, 8: 1.860, 9: 1.833,
        10: 1.812, 12: 1.782, 15: 1.753, 20: 1.725, 30: 1.697, 60: 1.671}


@dataclass(frozen=True, slots=True)
class Trend:
    """The window's fitted line: slope per unit of t, its one-sided 95 % lower bound, the
    rise over the window's span and the window's mean."""

    n: int
    slope: float
    lower: float
    rise: float
    mean: float

    @property
    def rising(self) -> bool:
        return self.lower > 0 and self.rise >= MIN_RISE * abs(self.mean) and self.rise > 0

    def to_dict(self) -> dict:
        return {"n": self.n, "slope": self.slope, "lower_95": self.lower, "rise": self.rise, "mean": self.mean,
                "rising": self.rising}


def t95(df: int) -> float:
    """t₀.₉₅(df): the table's entry at or below ``df`` (conservative), 1.645 past it."""
    if df > 60:
        return 1.645
    return _T95[max(k for k in _T95 if k <= df)]


def trend(t: list[float], y: list[float]) -> Trend | None:
    """The OLS trend of ``y`` over ``t``; None with fewer than 3 points or no spread in t."""
    n = len(t)
    if n < 3:
        return None
    mt, my = sum(t) / n, sum(y) / n
    stt = sum((ti - mt) ** 2 for ti in t)
    if stt <= 0:
        return None
    slope = sum((ti - mt) * (yi - my) for ti, yi in zip(t, y)) / stt
    resid = sum((yi - my - slope * (ti - mt)) ** 2 for ti, yi in zip(t, y))
    se = math.sqrt(resid / (n - 2) / stt)
    return Trend(n, slope, slope - t95(n - 2) * se, slope * (max(t) - min(t)), my)
