"""The pacer: absolute schedule, concurrency cap, stop — with a fake pool."""

import asyncio
import time

from servelab.client.http import Response
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
        return await run_schedule(pool, payloads, offsets, conc, stop, Counters())

    return asyncio.run(main())


def test_lateness_does_not_accumulate():
    # request 2 stalls the loop 60 ms; requests due after that still go at t0 + offset
    offsets = [i * 20 * MS for i in range(10)]
    out = run(FakePool(stall_on=2, stall_s=0.06), list(range(10)), offsets)
    lags = [(a.dispatched_ns - a.intended_ns) / MS for a in out.attempts]
    assert max(lags[3:6]) > 20  # the ones due during the stall are late...
    assert max(lags[7:]) < 5  # ...the rest are back on schedule (not shifted by 60 ms)
    assert [a.intended_ns - out.t0_ns for a in out.attempts] == offsets


def test_concurrency_cap_is_never_exceeded_and_queue_time_is_recorded():
    pool = FakePool(service_s=0.01)
    out = run(pool, list(range(12)), [0] * 12, conc=3)
    assert pool.peak == 3 and len(out.attempts) == 12
    queued = [a.sent_ns - a.dispatched_ns for a in out.attempts]
    assert max(queued) > 25 * MS  # the last ones waited ~3 service times for a slot


def test_stop_keeps_completed_and_counts_unsent():
    offsets = [i * 50 * MS for i in range(20)]
    out = run(FakePool(service_s=0.01), list(range(20)), offsets, stop_at_send=3)
    assert out.interrupted and len(out.attempts) == 3 and out.not_sent == 17
    assert [a.response is not None for a in out.attempts] == [True, True, False]  # the third was cut
