"""A task score with its uncertainty, and the MLPerf acceptance rule, item by item.

Score: the share of items answered right, with the 95 % Wilson score interval
(``wilson``: centre (p + z²/2n)/(1 + z²/n), half-width z·√(p(1−p)/n + z²/4n²)/(1 + z²/n)).

Acceptance (MLPerf Inference): the candidate's score ≥ ``ratio`` × the reference's (0.99 by
default). Judged on the items both runs answered, paired: per item x = c − ratio·r (c, r: 1
when right), whose mean is the margin score_c − ratio·score_r; its 95 % interval is
mean ± z·sd/√n. Above zero: *keeps ≥ ratio of the reference's score*; below zero: *worse*;
straddling zero: *not distinguishable with N items* — never "same".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

Z95 = 1.959963984540054
KEEPS, WORSE = "keeps the reference's score", "worse than the reference"


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # the ends are exact at 0 and n (rounding would put 60/60's top a hair under 1)
    return (0.0 if k == 0 else max(0.0, centre - half), 1.0 if k == n else min(1.0, centre + half))


@dataclass(frozen=True, slots=True)
class Score:
    right: int
    items: int
    failed: int  # items whose request failed: not graded, not wrong

    @property
    def share(self) -> float:
        return self.right / self.items if self.items else float("nan")

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.right, self.items)


def score_of(grades: dict[str, bool], failed: int = 0) -> Score:
    return Score(sum(grades.values()), len(grades), failed)


@dataclass(frozen=True, slots=True)
class Paired:
    items: int
    ref_score: float
    run_score: float
    margin: float  # run − ratio·ref over the paired items
    low: float
    high: float
    ratio: float
    verdict: str


def paired(ref: dict[str, bool], run: dict[str, bool], ratio: float = 0.99) -> Paired:
    keys = sorted(set(ref) & set(run))
    n = len(keys)
    x = [float(run[k]) - ratio * float(ref[k]) for k in keys]
    mean = sum(x) / n if n else 0.0
    sd = math.sqrt(sum((v - mean) ** 2 for v in x) / (n - 1)) if n > 1 else float("inf")
    half = Z95 * sd / math.sqrt(n) if n else float("inf")
    low, high = mean - half, mean + half
    verdict = KEEPS if low >= 0 else WORSE if high < 0 else f"not distinguishable with {n} items"
    ref_s = sum(ref[k] for k in keys) / n if n else float("nan")
    run_s = sum(run[k] for k in keys) / n if n else float("nan")
    return Paired(n, ref_s, run_s, mean, low, high, ratio, verdict)


def line(name: str, s: Score, p: Paired | None) -> str:
    lo, hi = s.interval
    text = f"{name}: task score {s.right}/{s.items} = {s.share:.1%} (95% CI {lo:.1%}–{hi:.1%})"
    if s.failed:
        text += f", {s.failed} failed request(s) not graded"
    if p is None:
        return text
    ratio = p.run_score / p.ref_score if p.ref_score else float("nan")
    return (f"{text}; reference {p.ref_score:.1%} on the same {p.items} items, ratio {ratio:.3f} "
            f"(needs ≥ {p.ratio:g}; margin {p.margin:+.3f}, 95% CI {p.low:+.3f}…{p.high:+.3f}) → {p.verdict}")
