"""The pacer: absolute schedule, concurrency cap, stop — with a fake pool."""

import asyncio
import time

from servelab.client.http import Response
from servelab.loadgen import pacer as runner
from servelab.loadgen.pacer import Counters, run_schedule

MS = 1_000_000


class FakePool:
    """``stall_on``: the payload whose send hogs the loop for ``stall_s`` with ``hog``
    (``time.sleep``, or a fake clock's advance)."""

    def __init__(self, service_s=0.001, stall_on=None, stall_s=0.0, hog=time.sleep):
        self.service_s, self.stall_on, self.stall_s, self.hog = service_s, stall_on, stall_s, hog
        self.open = self.peak = self.sent = 0
        self.stop_at = (None, None)

    async def send(self, payload, on_sent=None):
        self.sent += 1
        if self.sent == self.stop_at[0]:  # a stop (Ctrl-C) arrives while this one is in flight
            self.stop_at[1].set()
        if payload == self.stall_on:  # hog the loop: every timer fires late
            self.hog(self.stall_s)
        on_sent(time.perf_counter_ns())
        self.open += 1
        self.peak = max(self.peak, self.open)
        await asyncio.sleep(self.service_s)
        self.open -= 1
        return Response(status=200, done_ns=time.perf_counter_ns())


def run(pool, payloads, offsets, conc=None, stop_at_send=None):
    async def main():
        stop = asyncio.Event()
        pool.stop_at = (stop_at_send, stop)
        done = []
        out = await run_schedule(pool, payloads, offsets, conc, stop, Counters(), on_done=done.append)
        return out, sorted(done, key=lambda a: a.index)

    return asyncio.run(main())


class FakeClock:
    """The pacer's clock (``_now``) and its sleeps (``asyncio.wait`` with a timeout) on
    virtual time: a sleep lets the loop's ready tasks run once, then ends at its deadline,
    or later if one of them hogged the loop past it. A busy machine cannot move it."""

    def __init__(self, t_ns: int = 1_000_000 * MS) -> None:
        self.t_ns = t_ns
        self.waits: list[int] = []  # the deadline of every sleep the pacer asked for

    def now(self) -> int:
        return self.t_ns

    def hog(self, seconds: float) -> None:
        self.t_ns += round(seconds * 1e9)

    def install(self, monkeypatch) -> None:
        real_wait = asyncio.wait

        async def wait(futures, timeout=None, **kw):
            if timeout is None:
                return await real_wait(futures, **kw)
            deadline = self.t_ns + round(timeout * 1e9)
            self.waits.append(deadline)
            await asyncio.sleep(0)  # the tasks made ready meanwhile run (and may hog the loop)
            self.t_ns = max(self.t_ns, deadline)
            return set(), set(futures)

        monkeypatch.setattr(runner, "_now", self.now)
        monkeypatch.setattr(runner.asyncio, "wait", wait)


def test_lateness_does_not_accumulate(monkeypatch):
    """Request 2 stalls the loop 60 ms. Each wait the pacer asks for ends at t0 + offset,
    reckoned from the clock when it asks (never from the previous send), and the requests
    already due when the stall ends go without waiting. On a fake clock: asserted on the
    waits it asks for, not on how promptly a busy machine wakes it."""
    clock = FakeClock()
    clock.install(monkeypatch)
    offsets = [i * 20 * MS for i in range(10)]
    out, attempts = run(FakePool(stall_on=2, stall_s=0.06, hog=clock.hog), list(range(10)), offsets)
    intended = [a.intended_ns for a in attempts]
    assert [t - out.t0_ns for t in intended] == offsets
    # The stall begins when request 2 is sent (40 ms) and ends at 100 ms: request 3, whose wait
    # was asked before it, goes 40 ms late; 4 and 5, due at 80 and 100 ms, go at once without
    # a wait; 6 on waits for its own due time, 120 ms, not 100 + 20 ms after the late ones
    assert clock.waits == [intended[i] for i in (1, 2, 3, 6, 7, 8, 9)]  # absolute ends
    assert [(a.dispatched_ns - a.intended_ns) / MS for a in attempts] == [0, 0, 0, 40, 20, 0, 0, 0, 0, 0]


def test_concurrency_cap_is_never_exceeded_and_queue_time_is_recorded():
    pool = FakePool(service_s=0.01)
    out, attempts = run(pool, list(range(12)), [0] * 12, conc=3)
    assert pool.peak == 3 and len(attempts) == 12
    assert [a.index for a in sorted(attempts, key=lambda a: a.sent_ns)] == list(range(12))  # in order
    queued = [a.sent_ns - a.dispatched_ns for a in attempts]
    assert max(queued) > 25 * MS  # the last ones waited ~3 service times for a slot


def test_stop_keeps_completed_and_counts_unsent():
    offsets = [i * 50 * MS for i in range(20)]
    out, attempts = run(FakePool(service_s=0.01), list(range(20)), offsets, stop_at_send=3)
    assert out.interrupted and out.not_sent == 17
    assert [a.index for a in attempts] == [0, 1]  # the third was cut in flight: not handed on


def test_stop_under_a_cap_counts_requests_waiting_for_a_slot_as_never_sent():
    """Rate inf under a cap of 3: all 12 are released at t0, 3 take a slot and are sent, and
    a stop then comes (Ctrl-C). The 9 still waiting for a slot never went out: they are
    never sent, not cut — only the 3 in flight were cut before an answer."""
    pool = FakePool(service_s=0.05)
    out, attempts = run(pool, list(range(12)), [0] * 12, conc=3, stop_at_send=3)
    assert out.interrupted and attempts == []
    assert pool.sent == 3 and out.not_sent == 9


class SlowConnectPool(FakePool):
    """Its bytes go out only after a connect of ``connect_s``: a stop can cancel a request
    a sender took before it was sent."""

    def __init__(self, connect_s, **kw):
        super().__init__(**kw)
        self.connect_s = connect_s

    async def send(self, payload, on_sent=None):
        if payload == 0:  # the first goes out at once; the others are still connecting at the stop
            return await super().send(payload, on_sent)
        await asyncio.sleep(self.connect_s)
        return await super().send(payload, on_sent)


def test_a_request_cancelled_while_connecting_was_never_sent():
    pool = SlowConnectPool(connect_s=10.0, service_s=10.0)
    out, attempts = run(pool, list(range(5)), [0] * 5, conc=3, stop_at_send=1)
    assert out.interrupted and attempts == []
    assert pool.sent == 1 and out.not_sent == 4  # 2 taken but still connecting, 2 waiting for a slot


def test_wait_until_never_returns_before_its_instant():
    """uvloop's millisecond timers fired early in 113 of 300 such waits before the pacer waited
    again for what was left (the shared-t0 contract test saw a request 0.2 ms before t0)."""
    from servelab.loadgen.loop import loop_run

    async def main() -> list[int]:
        stopper = asyncio.ensure_future(asyncio.Event().wait())
        early = []
        for i in range(300):
            t = time.perf_counter_ns() + 300_000 + (i * 37_000) % 2_000_000
            assert await runner.wait_until(t, stopper)
            early.append(t - time.perf_counter_ns())
        stopper.cancel()
        return early

    assert max(loop_run(main())) <= 0
