"""The pacer: absolute schedule, concurrency cap, stop — with a fake pool."""

import asyncio
import time

from servelab.client.http import Response
from servelab.loadgen import pacer as runner
from servelab.loadgen.pacer import Counters, run_schedule

MS = 1_000_000


class FakePool:
    def __init__(self, service_s=0.001, stall_on=None, stall_s=0.0):
        self.service_s, self.stall_on, self.stall_s = service_s, stall_on, stall_s
        self.open = self.peak = self.sent = 0
        self.stop_at = (None, None)

    async def send(self, payload, on_sent=None):
        self.sent += 1
        if self.sent == self.stop_at[0]:  # a stop (Ctrl-C) arrives while this one is in flight
            self.stop_at[1].set()
        if payload == self.stall_on:  # hog the loop: every timer fires late
            time.sleep(self.stall_s)
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


def test_lateness_does_not_accumulate(monkeypatch):
    """Request 2 stalls the loop 60 ms. Each wait the pacer asks for ends at t0 + offset,
    reckoned from the clock when it asks (never from the previous send), and the requests
    already due when the stall ends go without waiting. Asserted on the waits it asks for,
    not on how promptly a busy machine wakes it."""
    readings, waits = [], []

    def now() -> int:
        readings.append(time.perf_counter_ns())
        return readings[-1]

    real_wait = asyncio.wait

    async def wait(futures, timeout=None, **kw):
        if timeout is not None:  # the pacer's sleep: where would it end?
            waits.append(readings[-1] + round(timeout * 1e9))
        return await real_wait(futures, timeout=timeout, **kw)

    monkeypatch.setattr(runner, "_now", now)
    monkeypatch.setattr(runner.asyncio, "wait", wait)
    offsets = [i * 20 * MS for i in range(10)]
    out, attempts = run(FakePool(stall_on=2, stall_s=0.06), list(range(10)), offsets)
    intended = [a.intended_ns for a in attempts]
    assert [t - out.t0_ns for t in intended] == offsets
    assert waits and all(abs(w - min(intended, key=lambda t: abs(t - w))) <= 1 for w in waits)  # absolute ends
    # The stall begins after request 2 is sent (>= 40 ms) and lasts >= 60 ms: requests 4 and 5,
    # due at 80 and 100 ms, are due when the pacer comes back and go without a wait.
    assert intended[4] not in waits and intended[5] not in waits
    assert min((a.dispatched_ns - a.intended_ns) / MS for a in attempts[3:5]) >= 20


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
