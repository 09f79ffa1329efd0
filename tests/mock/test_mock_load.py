"""The mock under load (mock in a child process, raw client here): every stream is served
in full, never early, and zero-delay streams go out in batches.

How late it writes and how many events per second it manages depend on the machine, so
they are figures, not assertions: ``python tests/mock/perf_mock.py --streams 128 --tokens 40``
prints them (lateness percentiles, events/s). That each event is due on an absolute grid,
so lateness does not accumulate, is asserted exactly in ``test_mock_timing.py``.
"""

from perf_mock import load

from servelab.mock import MockConfig, lateness_ns, run_in_subprocess
from servelab.mock.response import BATCH
from servelab.mock.server import new_event_loop


def run_load(config: MockConfig, conns: int, max_tokens: int):
    with run_in_subprocess(config) as mock:
        loop = new_event_loop()
        try:
            _, done = loop.run_until_complete(load(mock.port, conns, max_tokens, 0))
        finally:
            loop.close()
        return done, mock.truth()


def test_128_paced_streams_are_served_in_full_and_never_early():
    done, truth = run_load(MockConfig(port=0, ttft_ms=20, itl_ms=10), 128, 40)
    assert done == 128 and len(truth.requests) == 128
    assert all(r.finish == "ok" and r.output_tokens == 40 and len(r.event_ns) == 40 for r in truth.requests)
    late = [x for r in truth.requests for x in lateness_ns(r, 20, 10)]
    assert len(late) == 128 * 40 and min(late) >= 0
    assert all(list(r.event_ns) == sorted(r.event_ns) for r in truth.requests)


def test_zero_delay_streams_are_written_in_batches():
    """With no delay every event is due at once: each write carries up to BATCH of them
    (one write per event would cap the mock near 200k events/s here)."""
    done, truth = run_load(MockConfig(port=0), 16, 2000)
    assert done == 16 and all(r.finish == "ok" and r.output_tokens == 2000 for r in truth.requests)
    writes = [len(set(r.event_ns)) for r in truth.requests]  # events of one write share its stamp
    assert max(writes) <= -(-2000 // BATCH) <= 2000 // 32  # >= 32 events a write
