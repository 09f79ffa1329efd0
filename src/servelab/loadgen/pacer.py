"""Send prepared requests on an absolute schedule, under a concurrency cap.

Each request passes three instants, all ``perf_counter_ns``:
intended (t0 + offset) → dispatched (the pacer released it; the difference is
*schedule lag*, the client's own lateness) → sent (it got a concurrency slot
and a connection and its bytes were written; dispatched → sent is *client queue
time*, which a latency that starts at "sent" would hide).

A stop request (Ctrl-C, SIGTERM, a caller's event) ends dispatch at once and
cancels what is in flight; everything completed so far is kept.

Memory does not grow with the run: under a cap of C, C senders take released
requests in order (FIFO, as a semaphore would admit them), so a request waiting for
a slot is one int64 (its dispatch stamp), not a task; a finished attempt goes to
``on_done`` at once and is forgotten here.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from servelab.client.http import Pool, Response
from servelab.clock import cpu_s

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


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """A schedule's span and whether it ran to its end (why it did not is the run's: BenchRun)."""

    t0_ns: int
    end_ns: int
    interrupted: bool = False
    # requests whose bytes never went out: not yet released by the schedule, waiting for a
    # concurrency slot, or cancelled while connecting — a stop cuts only what was sent
    not_sent: int = 0


@dataclass(slots=True)
class Counters:
    """Live state, read by the progress line and telemetry (never written there)."""

    dispatched: int = 0
    done: int = 0
    failed: int = 0
    in_flight: int = 0
    lag_ns: int = 0  # schedule lag of the latest dispatch (dispatched − intended)
    t0_ns: int = 0  # the run's start instant, once it has one

    def begun(self) -> int:
        """Requests a sender has begun (answered or in flight): an upper bound on those sent,
        what a records file's sidecar keeps for ``results recover``."""
        return self.done + self.in_flight

    def client_cpu_s(self) -> float:
        """The client's CPU seconds so far: this process's (telemetry's client samples)."""
        return cpu_s()

    def as_row(self) -> list[int]:
        """The live counts as ints in COUNTER_ROW's order: what a client worker publishes."""
        return [getattr(self, name) for name in COUNTER_ROW]


# Counters as one row of ints, the shape client workers and Ray shards publish
# (loadgen/shards.Live sums the rows back into Counters)
COUNTER_ROW = ("dispatched", "done", "failed", "in_flight", "lag_ns")


async def run_schedule(pool: Pool, payloads, offsets_ns, max_concurrency: int | None,
                       stop: asyncio.Event, counters: Counters | None = None,
                       t0_ns: int | None = None, on_done=None) -> RunOutcome:
    """Send ``payloads[i]`` at ``t0 + offsets_ns[i]``; hand each answered attempt to ``on_done``
    (one cut by a stop is not answered, and not handed on).

    ``max_concurrency`` caps requests in flight (``None``: no cap); ``t0_ns``: an
    absolute start instant shared with other workers (``None``: now).
    """
    counters = counters or Counters()
    offsets = np.asarray(offsets_ns, dtype=np.int64)
    queue = _Queue(len(offsets))
    sender = _Sender(pool, payloads, offsets, queue, counters, on_done or (lambda attempt: None))

    def begin(t0: int) -> list:
        """The cap's senders, waiting for released requests (no cap: none, a task each)."""
        sender.t0 = t0
        return [asyncio.ensure_future(sender.work()) for _ in range(max_concurrency or 0)]

    def release(i: int, intended: int):
        t = _now()
        queue.release(i, t)
        counters.dispatched += 1
        counters.lag_ns = t - intended
        return None if max_concurrency else asyncio.ensure_future(sender.work(once=True))

    done = await dispatch(offsets, release, stop, counters, t0_ns, begin, queue.end)
    interrupted = done.stopped or queue.released < len(offsets)
    return RunOutcome(done.t0_ns, sender.end_ns or _now(), interrupted, len(offsets) - sender.sent)


@dataclass(frozen=True, slots=True)
class Dispatched:
    """How a paced release ended: its start instant, how many it released, whether a stop cut it."""

    t0_ns: int
    released: int
    stopped: bool


async def dispatch(offsets_ns, release, stop: asyncio.Event, counters: Counters, t0_ns: int | None = None,
                   begin=None, released_all=None) -> Dispatched:
    """The pacer's loop, for requests (``run_schedule``) and conversations alike: at
    ``t0 + offsets_ns[i]`` call ``release(i, intended_ns)``, which may return a task to wait
    for; then wait for every task, or cancel them all when ``stop`` is set.

    ``t0_ns``: an absolute start shared with other workers or replicas (None: now), set
    in ``counters``; ``begin(t0)``: tasks started at t0 (the cap's senders);
    ``released_all()``: called once the loop has released all it will. The collector is
    frozen and off for the whole run: the request loop allocates little, no GC pauses in it.
    """
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        t0 = counters.t0_ns = _now() if t0_ns is None else t0_ns
        stopper = asyncio.ensure_future(stop.wait())
        tasks = list(begin(t0)) if begin is not None else []
        released = 0
        for i in range(len(offsets_ns)):
            intended = t0 + int(offsets_ns[i])
            if not await wait_until(intended, stopper):
                break
            if (task := release(i, intended)) is not None:
                tasks.append(task)
            released += 1
        if released_all is not None:
            released_all()
        return Dispatched(t0, released, await _drain(tasks, stopper))
    finally:
        gc.enable()
        gc.unfreeze()


class _Queue:
    """Released requests waiting for a sender: indices ``taken … released−1``, in order."""

    def __init__(self, n: int) -> None:
        self.dispatched_ns = np.zeros(n, dtype=np.int64)
        self.released = self.taken = 0
        self.over = False  # the pacer has released all it will
        self._idle: deque[asyncio.Future] = deque()

    def release(self, i: int, t_ns: int) -> None:
        self.dispatched_ns[i] = t_ns
        self.released = i + 1
        self._wake(1)

    def end(self) -> None:
        self.over = True
        self._wake(len(self._idle))

    def _wake(self, n: int) -> None:
        while n and self._idle:
            waiter = self._idle.popleft()
            if not waiter.done():
                waiter.set_result(None)
                n -= 1

    async def take(self) -> int | None:
        """The next released index, waiting for the pacer; None once all are taken."""
        while self.taken >= self.released:
            if self.over:
                return None
            waiter = asyncio.get_running_loop().create_future()
            self._idle.append(waiter)
            await waiter
        self.taken += 1
        return self.taken - 1


class _Sender:
    """Takes released requests in order and sends them, one at a time per sender task."""

    def __init__(self, pool: Pool, payloads, offsets: np.ndarray, queue: _Queue, counters: Counters,
                 on_done) -> None:
        self.pool, self.payloads, self.offsets, self.queue = pool, payloads, offsets, queue
        self.counters, self.on_done = counters, on_done
        self.t0 = self.end_ns = 0
        self.unsent = 0  # taken, then cancelled by a stop before its bytes went out

    @property
    def sent(self) -> int:
        """Requests whose bytes went out (or that failed where they were released: a record)."""
        return self.queue.taken - self.unsent

    async def work(self, once: bool = False) -> None:
        while (i := await self.queue.take()) is not None:
            attempt = Attempt(i, self.t0 + int(self.offsets[i]), int(self.queue.dispatched_ns[i]))
            try:
                await send_one(self.pool, self.payloads[i], attempt, self.counters)
            except asyncio.CancelledError:
                self.unsent += not attempt.sent_ns and attempt.response is None
                raise
            self.end_ns = max(self.end_ns, attempt.response.done_ns)
            self.on_done(attempt)  # must cost next to nothing: the slot's next request waits on it
            if once:
                return


async def send_one(pool: Pool, payload: bytes, attempt: Attempt, counters: Counters) -> None:
    counters.in_flight += 1
    try:
        attempt.response = await pool.send(payload, on_sent=attempt.mark_sent)
    finally:
        counters.in_flight -= 1
    counters.done += 1
    resp = attempt.response
    if resp.error or resp.status != 200 or resp.closed_early:
        counters.failed += 1


async def wait_until(t_ns: int, stopper: asyncio.Future) -> bool:
    """Sleep until ``t_ns`` (absolute); False if a stop came first.

    Waits again for what is left: uvloop's timers count whole milliseconds from a clock read
    at the top of its loop, so one fires up to ~0.5 ms early (113 of 300 waits here), and a
    request released before its instant would precede a shared t0 or a stated wait."""
    while not stopper.done():
        delay = (t_ns - _now()) / 1e9
        if delay <= 0:
            return True
        done, _ = await asyncio.wait({stopper}, timeout=delay)
        if done:
            return False
    return False


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
