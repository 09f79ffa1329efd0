"""The run's stop rules, judged while it runs: ``--stop-when-saturated`` (the trend
test of metrics/trend.py), ``--stop-on-errors N`` and ``--stop-on-error-rate P:W``
(circuit breakers).

Off the request path: a task samples the live ``Counters`` every ``TICK_S`` and the
pacer hands each answered attempt's first-byte time here (one append). What it samples:

- outstanding requests: released by the pacer and not yet answered (dispatched − done),
  so a client-side queue under --max-concurrency counts as much as the server's;
- TTFT of each answered request (its first body bytes − its send), at its send time.

Over-saturated: over the last ``WINDOW_S`` seconds (or the whole run while it is
shorter, once ``MIN_SPAN_S`` of it is in), *both* series are rising by metrics/trend.py's
test (OLS slope whose one-sided 95 % bound is above zero, and a rise of at least
``MIN_RISE`` of the mean). Judged once; the verdict is latched with when it was made.
With ``saturation == "judge"`` (each point of a sweep) the run goes on and the verdict
is reported; with ``"stop"`` (bench) the run ends there. The rules' reasons are
records.END_REASONS'.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field

from servelab.config import LoadSpec
from servelab.loadgen.pacer import Attempt, Counters
from servelab.metrics.trend import MIN_RISE, trend

TICK_S = 0.1
WINDOW_S = 10.0
MIN_SPAN_S = 2.0
MIN_SAMPLES = 20  # of each series in the window
MIN_FINISHED_FOR_RATE = 10  # requests finished within an error-rate window before it can trip
_now = time.perf_counter_ns

RULE_TEXT = (f"over-saturated: requests outstanding at the client and TTFT both rising over the last "
             f"{WINDOW_S:g} s (sampled every {TICK_S:g} s; at least {MIN_SPAN_S:g} s and {MIN_SAMPLES} samples "
             f"each): OLS slope whose one-sided 95 % bound is above zero, rise ≥ {MIN_RISE:.0%} of the mean")


@dataclass(slots=True)
class Watch:
    """The rules of one run; ``reason`` is set when one ended it (or, judged only, fired)."""

    load: LoadSpec
    stop: asyncio.Event
    counters: Counters  # the run's live counts; its t0_ns is set before the first request goes out
    reason: str | None = None
    saturated_at_s: float | None = None  # seconds from t0 when judged over-saturated
    evidence: dict = field(default_factory=dict)
    _load: deque = field(default_factory=deque)  # (t_s, outstanding)
    _ttft: deque = field(default_factory=deque)  # (sent t_s, ttft ms)
    _counts: deque = field(default_factory=deque)  # (t_s, done, failed)

    @property
    def active(self) -> bool:
        return self.load.saturation != "off" or self.load.stop_on_errors is not None \
            or self.load.stop_on_error_rate is not None

    def answered(self, attempt: Attempt) -> None:
        """The pacer's on_done: one append (the slot's next request waits on it)."""
        resp = attempt.response
        if resp is not None and resp.reads and attempt.sent_ns:
            t0 = self.counters.t0_ns
            self._ttft.append(((attempt.sent_ns - t0) / 1e9, (resp.reads[0][0] - attempt.sent_ns) / 1e6))

    async def run(self) -> None:
        """Until cancelled or a rule fired that ends the run."""
        counters = self.counters
        while True:
            await asyncio.sleep(TICK_S)
            fired = self.judge(counters, (_now() - counters.t0_ns) / 1e9)
            if fired is not None and (fired != "saturated" or self.load.saturation == "stop"):
                self.reason = fired
                self.stop.set()
                return

    def judge(self, c: Counters, t_s: float) -> str | None:
        """One tick: the first rule that fires, by END_REASONS' names; None while none does."""
        if self.load.stop_on_errors is not None and c.failed >= self.load.stop_on_errors:
            return "errors"
        if self.load.stop_on_error_rate is not None and self._error_rate(c, t_s):
            return "error rate"
        if self.load.saturation != "off" and self._saturated(c, t_s):
            return "saturated"
        return None

    def _error_rate(self, c: Counters, t_s: float) -> bool:
        share, window_s = self.load.stop_on_error_rate
        self._counts.append((t_s, c.done, c.failed))
        while self._counts and self._counts[0][0] < t_s - window_s:
            self._counts.popleft()
        _, done0, failed0 = self._counts[0]
        finished = c.done - done0
        return finished >= MIN_FINISHED_FOR_RATE and (c.failed - failed0) / finished >= share

    def _saturated(self, c: Counters, t_s: float) -> bool:
        if self.saturated_at_s is not None:
            return True
        self._load.append((t_s, c.dispatched - c.done))
        for series in (self._load, self._ttft):
            while series and series[0][0] < t_s - WINDOW_S:
                series.popleft()
        if t_s < MIN_SPAN_S or min(len(self._load), len(self._ttft)) < MIN_SAMPLES:
            return False
        load, ttft = (trend([p[0] for p in s], [p[1] for p in s]) for s in (self._load, self._ttft))
        if load is None or ttft is None or not (load.rising and ttft.rising):
            return False
        self.saturated_at_s = t_s
        self.evidence = {"outstanding": load.to_dict(), "ttft_ms": ttft.to_dict()}
        return True

    def section(self) -> dict:
        """The result's ``stop_rules`` section: the rules asked for and what they found."""
        load = self.load
        return {"saturation": load.saturation, "saturated": self.saturated_at_s is not None,
                "saturated_at_s": self.saturated_at_s, "rule": RULE_TEXT, "evidence": self.evidence,
                "stop_on_errors": load.stop_on_errors,
                "stop_on_error_rate": list(load.stop_on_error_rate) if load.stop_on_error_rate else None,
                "fired": self.reason}
