"""Send prepared requests on an absolute schedule, under a concurrency cap.

Each request passes three instants, all ``perf_counter_ns``:
intended (t0 + offset) → dispatched (the pacer released it; the difference is
*schedule lag*, the client's own lateness) → sent (it got a concurrency slot
and a connection and its bytes were written; dispatched → sent is *client queue
time*, which a latency that starts at "sent" would hide).

A stop request (Ctrl-C, SIGTERM, a caller's event) ends dispatch at once and
cancels what is in flight; everything completed so far is kept.
"""

from __future__ import annotations

import asyncio
import gc
import time
from dataclasses import dataclass, field

from servelab.client.http import Pool, Response

_now = time.perf_counter_ns


@dataclass(slots=True)
class Attempt:
    """One request's life in the run (mutable while the run goes on)."""

    index: int
    intended_ns: int
    dispatched_ns: int = 0
    sent_ns: int = 0
    response: Response | None = None

    def mark_sent(self, t_ns: int) -> None:
        self.sent_ns = t_ns


@dataclass(slots=True)
class RunOutcome:
    t0_ns: int
    end_ns: int
    attempts: list[Attempt] = field(default_factory=list)
    interrupted: bool = False
    not_sent: int = 0  # requests the stop came too early for
    stopped_by: int | None = None  # the signal that stopped the run (SIGINT, SIGTERM), if one did


@dataclass(slots=True)
class Counters:
    """Live state, read by the progress line and telemetry (never written there)."""

    dispatched: int = 0
    done: int = 0
    failed: int = 0
    in_flight: int = 0
    lag_ns: int = 0  # schedule lag of the latest dispatch (dispatched − intended)


async def run_schedule(pool: Pool, payloads: list[bytes], offsets_ns, max_concurrency: int | None,
                       stop: asyncio.Event, counters: Counters | None = None,
                       t0_ns: int | None = None) -> RunOutcome:
    """Send ``payloads[i]`` at ``t0 + offsets_ns[i]``; return every attempt.

    ``max_concurrency`` caps requests in flight (``None``: no cap); ``t0_ns``: an
    absolute start instant shared with other workers (``None``: now).
    """
    counters = counters or Counters()
    sem = asyncio.Semaphore(max_concurrency) if max_concurrency else None
    tasks: list[asyncio.Task] = []
    attempts: list[Attempt] = []
    gc.collect()
    gc.freeze()  # the request loop allocates little; no GC pauses inside it
    gc.disable()
    try:
        t0 = _now() if t0_ns is None else t0_ns
        stopper = asyncio.ensure_future(stop.wait())
        for i, offset in enumerate(offsets_ns):
            attempt = Attempt(i, t0 + int(offset))
            if not await _wait_until(attempt.intended_ns, stopper):
                break
            attempt.dispatched_ns = _now()
            attempts.append(attempt)
            counters.dispatched += 1
            counters.lag_ns = attempt.dispatched_ns - attempt.intended_ns
            tasks.append(asyncio.ensure_future(_one(pool, payloads[i], attempt, sem, counters)))
        cut = await _drain(tasks, stopper)
        interrupted = cut or len(attempts) < len(payloads)
        end = max((a.response.done_ns for a in attempts if a.response), default=_now())
        return RunOutcome(t0, end, attempts, interrupted, len(payloads) - len(attempts))
    finally:
        gc.enable()
        gc.unfreeze()


async def _wait_until(t_ns: int, stopper: asyncio.Future) -> bool:
    """Sleep until ``t_ns`` (absolute); False if a stop came first."""
    if stopper.done():
        return False
    delay = (t_ns - _now()) / 1e9
    if delay > 0:
        done, _ = await asyncio.wait({stopper}, timeout=delay)
        if done:
            return False
    return True


async def _one(pool: Pool, payload: bytes, attempt: Attempt, sem, counters: Counters) -> None:
    if sem is not None:
        await sem.acquire()
    counters.in_flight += 1
    try:
        attempt.response = await pool.send(payload, on_sent=attempt.mark_sent)
    finally:
        counters.in_flight -= 1
        if sem is not None:
            sem.release()
    counters.done += 1
    resp = attempt.response
    if resp.error or resp.status != 200 or resp.closed_early:
        counters.failed += 1


async def _drain(tasks: list[asyncio.Task], stopper: asyncio.Future) -> bool:
    """Wait for every task, or cancel the rest when a stop arrives. True if stopped.

    One future for "all done" instead of ``asyncio.wait`` over the task set:
    re-waiting on thousands of tasks after each completion is quadratic.
    """
    loop = asyncio.get_running_loop()
    all_done = loop.create_future()
    left = [len(tasks)]

    def one_done(_task) -> None:
        left[0] -= 1
        if left[0] == 0 and not all_done.done():
            all_done.set_result(None)

    for task in tasks:
        task.add_done_callback(one_done)
    if not tasks:
        all_done.set_result(None)
    await asyncio.wait({all_done, stopper}, return_when=asyncio.FIRST_COMPLETED)
    if all_done.done():
        stopper.cancel()
        return False
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return True
