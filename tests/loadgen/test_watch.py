"""The stop rules, judged tick by tick on hand-fed counters (no server, no clock)."""

import asyncio

from servelab.config import LoadSpec
from servelab.loadgen.pacer import Attempt, Counters
from servelab.loadgen.watch import MIN_FINISHED_FOR_RATE, TICK_S, Watch
from servelab.client.http import Response


def watch(**load) -> Watch:
    return Watch(LoadSpec(**load), asyncio.Event(), Counters())


def answered(w: Watch, sent_s: float, ttft_s: float) -> None:
    a = Attempt(0, 0, 0, int(sent_s * 1e9), Response(200, reads=[(int((sent_s + ttft_s) * 1e9), b"x")]))
    w.answered(a)


def test_the_error_count_breaker_fires_at_n():
    w, c = watch(stop_on_errors=3), Counters(done=10, failed=2)
    assert w.judge(c, 1.0) is None
    c.failed = 3
    assert w.judge(c, 1.1) == "errors"


def test_the_error_rate_breaker_looks_only_at_its_window():
    w, c = watch(stop_on_error_rate=(0.5, 2.0)), Counters()
    for k in range(40):  # 4 s of 10 requests/s, all fine
        c.done += 1
        assert w.judge(c, k * TICK_S) is None
    for k in range(40, 40 + MIN_FINISHED_FOR_RATE + 5):  # then every one fails
        c.done += 1
        c.failed += 1
        fired = w.judge(c, k * TICK_S)
    assert fired == "error rate" and c.failed < 40  # the 40 fine ones are outside the 2 s window


def test_a_growing_queue_with_growing_ttft_is_over_saturated_a_level_one_is_not():
    for rising, want in ((True, "saturated"), (False, None)):
        w, c = watch(saturation="judge"), Counters()
        fired = None
        for k in range(60):  # 6 s, a tick each 0.1 s
            t = k * TICK_S
            c.dispatched += 10
            c.done += 5 if rising else 10  # half admitted: the outstanding count grows 50/s
            answered(w, t, 0.05 + (0.1 * t if rising else 0.01 * (k % 3)))
            fired = fired or w.judge(c, t)
        assert fired == want
        assert w.section()["saturated"] is (want is not None)
