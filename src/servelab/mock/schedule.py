"""One alarm for every stream: a heap of (due_ns, seq, job) and a single wake-up.

Why absolute times: each event is due at ``admit + ttft + j·itl``, computed from the
start, never from the previous write, so a late tick makes those events late once and
never shifts the ones after (lateness does not accumulate). Why one alarm: at 512
streams × 100 events/s a timer per event costs more than the writes; a tick writes
everything that is due, across streams, and re-arms once.

Why a timerfd: event-loop timers have millisecond resolution (uvloop even fires up to
~1 ms early), so hitting a due time means either writing up to a millisecond late or
spinning the loop until it comes — and with hundreds of streams some due time is always
less than a millisecond away, so the loop would spin all the time. On Linux a timerfd
on CLOCK_MONOTONIC (the clock of ``perf_counter_ns``) wakes the loop at the due
nanosecond, through the loop's own reader machinery. Elsewhere: loop timers, spinning
out the last sub-millisecond.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import sys
import time
from heapq import heappop, heappush
from itertools import count
from time import perf_counter_ns
from typing import Protocol


# Writes per tick before yielding to the loop (~18 µs each on loopback here).
TICK_BATCH = 32


class Job(Protocol):
    def fire(self, now_ns: int) -> int | None:
        """Write what is due at ``now_ns``; return the next due time, or None when done
        (or blocked: the job re-adds itself when it can go on)."""


class Scheduler:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._heap: list[tuple[int, int, Job]] = []
        self._seq = count()
        self._alarm = make_alarm(loop, self._tick)
        self._armed: int | None = None  # due time the alarm is set for

    def add(self, due_ns: int, job: Job) -> None:
        heappush(self._heap, (due_ns, next(self._seq), job))
        if self._armed is None or due_ns < self._armed:
            self._armed = due_ns
            self._alarm.set(due_ns)

    def close(self) -> None:
        self._heap.clear()
        self._alarm.close()

    def _tick(self) -> None:
        heap, seq = self._heap, self._seq
        # Only what is due at the start of the tick: a job re-added "now" (a zero-delay
        # stream with more to send) waits for the next tick, so reads and other
        # connections get their turn in between.
        # At most TICK_BATCH writes, then back to the loop: at 512 streams a whole
        # tick takes ~9 ms, and a request arriving meanwhile would wait that long
        # to be read (a delay the truth cannot see). The alarm, re-set to a time
        # already past, fires again on the loop's next poll, after pending reads.
        now = perf_counter_ns()
        budget = TICK_BATCH
        while heap and heap[0][0] <= now and budget:
            job = heappop(heap)[2]
            nxt = job.fire(perf_counter_ns())
            budget -= 1
            if nxt is not None:
                heappush(heap, (nxt if nxt > now else now + 1, next(seq), job))
        self._armed = heap[0][0] if heap else None
        if self._armed is not None:
            self._alarm.set(self._armed)


def make_alarm(loop: asyncio.AbstractEventLoop, callback) -> TimerFdAlarm | LoopAlarm:
    if sys.platform == "linux" and "CLOCK_MONOTONIC" in time.get_clock_info("perf_counter").implementation:
        try:
            return TimerFdAlarm(loop, callback)
        except (OSError, AttributeError, NotImplementedError):
            pass
    return LoopAlarm(loop, callback)


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _ITimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


CLOCK_MONOTONIC, TFD_TIMER_ABSTIME = 1, 1
TFD_NONBLOCK, TFD_CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC if hasattr(os, "O_CLOEXEC") else 0


class TimerFdAlarm:
    """Calls ``callback`` once at an absolute ``perf_counter_ns`` time (Linux timerfd)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, callback) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self._settime = libc.timerfd_settime
        fd = libc.timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "timerfd_create failed")
        self._fd, self._loop, self._callback = fd, loop, callback
        self._spec = _ITimerspec()
        self._ref = ctypes.byref(self._spec)
        loop.add_reader(fd, self._ready)

    def set(self, due_ns: int) -> None:
        value = self._spec.it_value
        value.tv_sec, value.tv_nsec = divmod(max(due_ns, 1), 1_000_000_000)  # 0 would disarm
        if self._settime(self._fd, TFD_TIMER_ABSTIME, self._ref, None) < 0:
            raise OSError(ctypes.get_errno(), "timerfd_settime failed")

    def _ready(self) -> None:
        try:
            os.read(self._fd, 8)
        except BlockingIOError:  # re-armed for later after it had fired: not due yet
            return
        self._callback()

    def close(self) -> None:
        if self._fd >= 0:
            self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = -1


class LoopAlarm:
    """Portable fallback on loop timers (millisecond resolution): a tick that comes early
    re-arms for the rest, which rounds to zero, so the loop spins until the due time."""

    def __init__(self, loop: asyncio.AbstractEventLoop, callback) -> None:
        self._loop, self._callback = loop, callback
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0

    def set(self, due_ns: int) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._due = due_ns
        delay = (due_ns - perf_counter_ns()) / 1e9
        self._handle = self._loop.call_later(delay if delay > 0 else 0, self._ready)

    def _ready(self) -> None:
        self._handle = None
        if perf_counter_ns() < self._due:
            self.set(self._due)
        else:
            self._callback()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
