"""The client's own state, read by a cheap timer on the client's event loop.

Each tick copies a few integers from the runner's counters (``ClientCounters``:
loadgen/pacer.Counters, or client workers' summed ``Live``) and the client's CPU time —
microseconds of work, nothing parsed, nothing sent. Rows are turned into timeline
samples only after the run.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

_now = time.perf_counter_ns


class ClientCounters(Protocol):
    """What the sampler reads of a run's live counters (loadgen/pacer.Counters is one)."""

    dispatched: int
    done: int
    failed: int
    in_flight: int
    lag_ns: int

    def client_cpu_s(self) -> float:
        """The client's CPU seconds so far (client workers: the busiest one's, the core that binds)."""


class ClientSampler:
    def __init__(self, interval_s: float) -> None:
        self.interval_ns = int(interval_s * 1e9)
        self.rows: list[tuple[int, int, int, int, int, int, float]] = []
        self.counters = None
        self._task: asyncio.Task | None = None

    def start(self, counters: ClientCounters) -> None:
        """Call from inside the running loop (the bench's on_start hook, at t0)."""
        self.counters = counters
        self._take()
        self._task = asyncio.ensure_future(self._loop())

    async def _loop(self) -> None:
        due = _now()
        try:
            while True:
                due += self.interval_ns
                await asyncio.sleep(max(0.0, (due - _now()) / 1e9))
                self._take()
        finally:  # cancelled when the run's loop closes: one last row at the end
            self._take()

    def _take(self) -> None:
        c = self.counters
        self.rows.append((_now(), c.dispatched, c.done, c.failed, c.in_flight, c.lag_ns, c.client_cpu_s()))

    def samples(self) -> list[dict]:
        """Timeline samples. ``waiting`` = dispatched − done − in flight: requests
        whose time has come but that have no concurrency slot yet. ``cpu`` = client
        CPU seconds per wall second since the previous row (1.0 = one core)."""
        out = []
        for prev, row in zip([None, *self.rows], self.rows):
            t, dispatched, done, failed, in_flight, lag_ns, cpu = row
            sample = {"src": "client", "t_ns": t, "in_flight": in_flight,
                      "waiting": dispatched - done - in_flight, "dispatched": dispatched, "done": done,
                      "failed": failed, "lag_ms": round(lag_ns / 1e6, 3)}
            if prev is not None and t > prev[0]:
                sample["cpu"] = round((cpu - prev[6]) / ((t - prev[0]) / 1e9), 4)
            out.append(sample)
        return out
