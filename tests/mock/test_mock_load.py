"""The mock keeps its schedule under load (mock in a child process, raw client here)."""

import statistics

from perf_mock import load

from servelab.mock import MockConfig, lateness_ns, run_in_subprocess
from servelab.mock.server import new_event_loop

MS = 1_000_000


def test_128_paced_streams_stay_on_schedule():
    with run_in_subprocess(MockConfig(port=0, ttft_ms=20, itl_ms=10)) as mock:
        loop = new_event_loop()
        try:
            _, done = loop.run_until_complete(load(mock.port, 128, 40, 0))
        finally:
            loop.close()
        truth = mock.truth()
    assert done == 128
    assert all(r.finish == "ok" and r.output_tokens == 40 for r in truth.requests)
    late = sorted(x for r in truth.requests for x in lateness_ns(r, 20, 10))
    assert late[0] >= 0
    assert statistics.median(late) < 3 * MS, f"median lateness {statistics.median(late) / MS:.1f} ms"
    # lateness must not grow along a stream (absolute schedule): last events vs first
    firsts = [lateness_ns(r, 20, 10)[0] for r in truth.requests]
    lasts = [lateness_ns(r, 20, 10)[-1] for r in truth.requests]
    assert statistics.median(lasts) < statistics.median(firsts) + 3 * MS


def test_zero_delay_is_fast():
    with run_in_subprocess(MockConfig(port=0)) as mock:
        loop = new_event_loop()
        try:
            wall, done = loop.run_until_complete(load(mock.port, 16, 2000, 0))
        finally:
            loop.close()
    assert done == 16
    # measured ~1.5M events/s here; one write per event tops out near 200k/s, so the
    # 300k/s goal fails that and still leaves a busy machine 5× headroom
    assert 16 * 2000 / wall > 300_000, f"{16 * 2000 / wall:,.0f} events/s"
