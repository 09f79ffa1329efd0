"""Timelines from known regimes, for the property test and ``bench/diagnose_property.py``.

A case is a run of ``n`` loaded samples: a lead-in with nothing limiting, a bound phase
of ``bound`` samples in which one known limit holds (for ``mix``: the token budget for
``bound`` samples, then the count cap for ``extra``), then a tail that drains with no
queue — long-tailed runs are the ones whose means hid a limit. ``expected()`` says
which verdict must come first and the share of the run it must quote; the share is
exact (k of n samples), so the test compares it to three decimals, as the evidence
rounds it.
"""

from __future__ import annotations

from dataclasses import dataclass

from diag_timelines import make_timeline, run

from servelab.diagnose.rules import PARTIAL

REGIMES = ("scheduler", "token", "kv", "client", "both", "none", "mix")
BUDGET = 8192  # max_num_batched_tokens in every case
STEPS = 10  # engine steps per sample interval (the iteration-token histogram's count rises by this)


@dataclass(frozen=True, slots=True)
class Case:
    regime: str
    lead: int  # samples before the limit binds (the load ramps up)
    bound: int  # samples in which the regime's limit holds (none: requests waiting, below any limit)
    tail: int  # samples draining after it, no queue
    cap: int  # max_num_seqs; the client's --max-concurrency for "client" and "both" (there equal to max_num_seqs)
    extra: int = 0  # mix: samples at the count cap after the token-budget phase
    finite_rate: bool = False

    @property
    def n(self) -> int:
        return self.lead + self.bound + self.extra + self.tail

    def facts(self) -> dict:
        seqs = 4 * self.cap if self.regime == "client" else self.cap
        return {"max_num_seqs": seqs, "max_num_batched_tokens": BUDGET,
                "max_concurrency": self.cap if self.regime in ("client", "both") else None,
                "request_rate": 20.0 if self.finite_rate else float("inf")}

    def expected(self) -> tuple[str, str | None, float]:
        """(verdict id first, the scheduler's limit or None, share of the run it must quote)."""
        if self.regime == "mix":
            (k, limit) = max((self.bound, "max_num_batched_tokens"), (self.extra, "max_num_seqs"))
            return ("scheduler-cap", limit, k / self.n) if k / self.n >= PARTIAL else ("no-limit-found", None, 0.0)
        if self.regime == "none":
            return "no-limit-found", None, 0.0
        share = self.bound / self.n
        verdict, limit = {"scheduler": ("scheduler-cap", "max_num_seqs"),
                          "token": ("scheduler-cap", "max_num_batched_tokens"),
                          "kv": ("kv-capacity", None), "client": ("client-concurrency-cap", None),
                          "both": ("client-concurrency-cap", None)}[self.regime]
        if self.regime != "kv" and share < PARTIAL:  # preemptions are named however briefly they came
            return "no-limit-found", None, 0.0
        return verdict, limit, share

    def timeline(self):
        rows = [self.row(i) for i in range(self.n)]
        engine, counters = [], {"iteration_tokens_sum": 0.0, "iteration_tokens_count": 0.0, "preemptions": 0.0}
        for running, waiting, kv, tokens, preempted, _ in rows:
            counters = {"iteration_tokens_sum": counters["iteration_tokens_sum"] + STEPS * tokens,
                        "iteration_tokens_count": counters["iteration_tokens_count"] + STEPS,
                        "preemptions": counters["preemptions"] + preempted}
            engine.append({"running": running, "waiting": waiting, "kv_usage": kv, **counters})
        client = [{"in_flight": r[5][0], "waiting": r[5][1], "cpu": 0.05, "lag_ms": 0.1} for r in rows]
        tl = make_timeline(self.n, engine=engine.__getitem__, client=client.__getitem__)
        # the scraper's sample before t0: counters at zero, so the first tick's steps are counted
        tl.samples.insert(0, {"t_ms": -249.0, "src": "engine", "running": 0.0, "waiting": 0.0, "kv_usage": 0.0,
                              "iteration_tokens_sum": 0.0, "iteration_tokens_count": 0.0, "preemptions": 0.0})
        return tl

    def row(self, i: int):
        """(running, waiting, kv, tokens per step, preemptions, (client in flight, client waiting))."""
        phase = "lead" if i < self.lead else "bound" if i < self.lead + self.bound else \
            "extra" if i < self.lead + self.bound + self.extra else "tail"
        j = i - {"lead": 0, "bound": self.lead, "extra": self.lead + self.bound,
                 "tail": self.lead + self.bound + self.extra}[phase]
        return ROWS[self.regime](self, phase, j)


def check(case: Case) -> None:
    """The property: the first verdict is the regime's, with its limit and its exact share."""
    d = run(case.timeline(), **case.facts())
    want_id, want_limit, want_share = case.expected()
    top = d.top
    assert top.id == want_id, (case, top.id, top.summary)
    if want_id != "no-limit-found":
        assert top.evidence["bound"]["share"] == round(want_share, 3), (case, top.evidence["bound"])
        assert f"{want_share:.0%} of the run" in top.summary, (case, top.summary)
    if want_limit is not None:
        assert top.evidence["limit"] == want_limit, (case, top.evidence)
    if case.regime == "none":
        assert ("no queue at the engine" in top.summary) == (case.bound == 0), (case, top.summary)
    unbounded = not case.facts()["max_concurrency"] and not case.finite_rate
    for v in d.verdicts:  # "offer more load" is never said to a run that offered all of it at once
        assert not (unbounded and "raise the offered load" in v.next), (case, v.next)


def _below(case: Case, j: int, of: int) -> float:
    """A running count that climbs (or drains) below the cap: 1 … cap − 1."""
    return float(max(1, min(case.cap - 1, 1 + (case.cap - 2) * j // max(of, 1))))


def _quiet(case: Case, phase: str, j: int):
    running = _below(case, j if phase == "lead" else case.tail - j, case.lead if phase == "lead" else case.tail)
    return running, 0.0, 0.3, running, 0.0, (int(running), 0)


def _scheduler(case: Case, phase: str, j: int):
    if phase != "bound":
        return _quiet(case, phase, j)
    waiting = float(1 + j % 7)
    return float(case.cap), waiting, 0.2, float(case.cap), 0.0, (case.cap + int(waiting), 0)


def _token(case: Case, phase: str, j: int):
    if phase not in ("bound", "extra"):
        return _quiet(case, phase, j)
    if phase == "extra":  # mix: the count cap after the budget
        return float(case.cap), 3.0, 0.2, float(case.cap), 0.0, (case.cap + 3, 0)
    running = _below(case, j, case.bound)
    return running, float(40 - j % 40), 0.2, float(BUDGET - j % 500), 0.0, (int(running) + 40 - j % 40, 0)


def _kv(case: Case, phase: str, j: int):
    if phase != "bound":
        return _quiet(case, phase, j)
    running = _below(case, j % 3 + case.cap // 2, case.cap)
    return running, float(2 + j % 5), 0.93 + 0.01 * (j % 7), running, float(1 + j % 3), (int(running) + 2 + j % 5, 0)


def _client(case: Case, phase: str, j: int):
    if phase != "bound":
        return _quiet(case, phase, j)
    return float(case.cap), 0.0, 0.2, float(case.cap), 0.0, (case.cap, j % 9)


def _both(case: Case, phase: str, j: int):
    """The client's cap equal to max_num_seqs: running sits at it, the rest wait for a client slot."""
    if phase != "bound":
        return _quiet(case, phase, j)
    return float(case.cap), 0.0, 0.2, float(case.cap), 0.0, (case.cap, 1 + j % 9)


def _none(case: Case, phase: str, j: int):
    """A burst admitted below every limit (keep ``bound`` under PARTIAL of the run): requests
    wait a moment, running stays below the cap, steps far below the budget."""
    if phase != "bound":
        return _quiet(case, phase, j)
    running = _below(case, j, case.bound)
    return running, float(1 + j % 4), 0.2, running + 8.0, 0.0, (int(running) + 1 + j % 4, 0)


ROWS = {"scheduler": _scheduler, "token": _token, "kv": _kv, "client": _client, "both": _both, "none": _none,
        "mix": _token}
