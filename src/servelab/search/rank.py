"""Ranking tuned configs by a conservative score, with the noise said out loud.

Each config ran at one or more loads, each load once or more (repeats). The
objective of one run is its output tok/s ("throughput") or its requests/s that
met every per-request SLO ("goodput").

Rules (stated in every report, see ``rule_text``):
  - a load *qualifies* when every repeat at it meets the SLO: no failed request
    and each limit (p99 TTFT, TPOT, E2EL as given) at or below its bound;
  - its score = median − spread over its repeats, spread = (max − min) / 2, so
    with 2 repeats the score is the worse run. One run shows no spread of its own:
    it pays the largest spread any repeated config showed — otherwise repeating a
    config could only push it below the ones never repeated;
  - a config's score is its best qualifying load's;
  - order: configs with a qualifying load by score; then those that ran but never
    qualified (by their best score regardless); then those that did not run.
Two configs are *within noise* when their ranges overlap: the runs of the one below
reach the worst run of the one above (one run: its value ± the spread it pays).
With no repeats anywhere the noise is unknown.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from servelab.search.points import Point
from servelab.search.slo import meets, text as slo_text

OBJECTIVES = ("throughput", "goodput")
# Why a config has no runs; the tune report shows each with its reason.
NOT_RUN = ("skipped", "infeasible")


@dataclass(frozen=True, slots=True)
class ConfigRuns:
    """What one config produced: every run as a point (several per load with repeats)."""

    name: str
    points: tuple[Point, ...] = ()
    status: str = "ran"  # "ran" | "skipped" (cannot fit; never launched) | "infeasible" (failed to start)
    note: str = ""  # the reason, for skipped/infeasible; the last log lines go in the report


@dataclass(frozen=True, slots=True)
class Score:
    load: float
    values: tuple[float, ...]  # the objective of each repeat, in run order
    qualifies: bool
    borrowed: float = 0.0  # the spread a single run pays (the largest a repeated config showed)

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def repeated(self) -> bool:
        return len(self.values) > 1

    @property
    def spread(self) -> float:
        return (max(self.values) - min(self.values)) / 2 if self.repeated else self.borrowed

    @property
    def low(self) -> float:
        return min(self.values) if self.repeated else self.values[0] - self.borrowed

    @property
    def high(self) -> float:
        return max(self.values) if self.repeated else self.values[0] + self.borrowed

    @property
    def value(self) -> float:
        return self.median - self.spread


@dataclass(frozen=True, slots=True)
class Ranked:
    config: ConfigRuns
    score: Score | None  # the best qualifying load's, else the best load's; None: no runs
    verdict: str  # "meets" | "misses SLO" | "failed requests" | "skipped" | "infeasible" | "no runs"

    @property
    def name(self) -> str:
        return self.config.name


def rule_text(objective: str, limits: dict[str, float]) -> str:
    slo = slo_text(limits) or "no latency limit"
    what = "output tok/s" if objective == "throughput" else "goodput (req/s meeting the SLO)"
    return (f"score = median − spread of {what} over repeats (spread = half the range; one run pays the "
            f"largest spread a repeated config showed), at the best load where every repeat meets: "
            f"no failed request, {slo}")


def objective_of(p: Point, objective: str) -> float:
    if objective == "goodput":
        return p.goodput if p.goodput is not None else 0.0
    return p.throughput


def load_scores(points: tuple[Point, ...], limits: dict[str, float], objective: str,
                borrowed: float = 0.0) -> list[Score]:
    """One score per load, repeats grouped, loads ascending."""
    loads = sorted({p.load for p in points})
    out = []
    for load in loads:
        runs = [p for p in points if p.load == load]
        out.append(Score(load, tuple(objective_of(p, objective) for p in runs),
                         all(meets(p, limits) for p in runs), borrowed))
    return out


def best_score(points: tuple[Point, ...], limits: dict[str, float], objective: str,
               borrowed: float = 0.0) -> Score | None:
    """The best qualifying load's score; if none qualifies, the best load's (not qualifying)."""
    scores = load_scores(points, limits, objective, borrowed)
    qualifying = [s for s in scores if s.qualifies]
    pool = qualifying or scores
    return max(pool, key=lambda s: (s.value, -s.load)) if pool else None


def rank_configs(configs: list[ConfigRuns], limits: dict[str, float] | None = None,
                 objective: str = "throughput") -> list[Ranked]:
    noise = largest_spread(configs, limits or {}, objective)
    ranked = [_judge(c, limits or {}, objective, noise) for c in configs]
    return sorted(ranked, key=_order)


def largest_spread(configs: list[ConfigRuns], limits: dict[str, float], objective: str) -> float:
    """The largest spread at any repeated load of any config that ran: the noise a single run pays."""
    spreads = [s.spread for c in configs if c.status not in NOT_RUN
               for s in load_scores(c.points, limits, objective) if s.repeated]
    return max(spreads, default=0.0)


def _judge(config: ConfigRuns, limits: dict[str, float], objective: str, noise: float) -> Ranked:
    if config.status in NOT_RUN:
        return Ranked(config, None, config.status)
    score = best_score(config.points, limits, objective, noise)
    if score is None:
        return Ranked(config, None, "no runs")
    if score.qualifies:
        return Ranked(config, score, "meets")
    failed = any(p.errors for p in config.points if p.load == score.load)
    return Ranked(config, score, "failed requests" if failed else "misses SLO")


_TIER = {"meets": 0, "misses SLO": 1, "failed requests": 1, "no runs": 2, "infeasible": 3, "skipped": 4}


def _order(r: Ranked) -> tuple:
    return (_TIER[r.verdict], -(r.score.value if r.score else 0.0), r.name)


def top(ranked: list[Ranked], k: int) -> list[Ranked]:
    """The ``k`` best configs that qualify: the candidates worth repeating."""
    return [r for r in ranked if r.verdict == "meets"][:k]


def within_noise(above: Score, below: Score) -> bool | None:
    """Do the two ranges overlap? None when neither shows any spread (no repeats anywhere)."""
    if not (above.repeated or below.repeated or above.borrowed):
        return None
    return below.high >= above.low


def lead_text(ranked: list[Ranked]) -> str:
    """How far the winner leads the runner-up, and whether that is more than the noise."""
    ok = [r for r in ranked if r.verdict == "meets"]
    if not ok:
        return "no config meets the SLO"
    if len(ok) == 1:
        return f"{ok[0].name} is the only config that meets the SLO"
    first, second = ok[0].score, ok[1].score
    gain = first.value / second.value - 1 if second.value > 0 else float("inf")
    noise = within_noise(first, second)
    said = ("noise unknown (1 run each: repeat with --repeats)" if noise is None
            else "within noise (their ranges overlap)" if noise else "beyond noise (their ranges do not overlap)")
    single = [r.name for r in ok[:2] if not r.score.repeated]
    paid = (f"; {single[0]} ran once and pays ±{first.borrowed:.1f}, the largest spread seen"
            if single and noise is not None else "")
    return f"lead over {ok[1].name}: {gain:+.1%} on score — {said}{paid}"
