"""loadgen/shards.py: one schedule dealt to workers, where their records go back, and how
their live counters add up (pure)."""

from __future__ import annotations

import numpy as np

from servelab.loadgen.arrivals import arrival_offsets_ns
from servelab.loadgen.pacer import COUNTER_ROW, Counters
from servelab.loadgen.shards import LIVE_FIELDS, Live, concurrency_shares, global_index, live_row, split
from servelab.records import SampleRequest


def samples(n: int) -> list[SampleRequest]:
    return [SampleRequest(f"p{i}", 3, 4, f"r{i}") for i in range(n)]


def test_the_shards_together_are_exactly_the_one_schedule():
    offsets = arrival_offsets_ns(101, 50.0, 0.5, np.random.default_rng(7))
    shards = split(samples(101), offsets, None, 3)
    pairs = sorted((int(o), s.request_id) for sh in shards for o, s in zip(sh.offsets_ns, sh.samples))
    assert pairs == sorted((int(o), f"r{i}") for i, o in enumerate(offsets))
    assert [len(sh.samples) for sh in shards] == [34, 34, 33]
    assert [s.request_id for s in shards[1].samples[:3]] == ["r1", "r4", "r7"]  # round-robin


def test_concurrency_shares_sum_to_the_cap_and_differ_by_at_most_one():
    for cap in range(2, 40):
        for n in range(1, cap + 1):
            shares = concurrency_shares(cap, n)
            assert sum(shares) == cap and max(shares) - min(shares) <= 1 and min(shares) >= 1
    assert concurrency_shares(5, 2) == [3, 2]
    assert concurrency_shares(None, 3) == [None, None, None]


def test_global_index_puts_every_shards_record_back_where_split_took_it():
    reqs = samples(11)
    for n in (1, 2, 3, 4):
        shards = split(reqs, np.arange(11), None, n)
        back = {global_index(s.index, k, n): r.request_id for s in shards for k, r in enumerate(s.samples)}
        assert back == {j: f"r{j}" for j in range(11)}


def test_the_shards_live_rows_add_up_to_one_clients_counters():
    """Sums, except lag (the latest worst) and CPU (the busiest shard's: the core that binds)."""
    a = Counters(dispatched=10, done=7, failed=1, in_flight=3, lag_ns=400)
    b = Counters(dispatched=5, done=5, failed=0, in_flight=0, lag_ns=900)
    live = Live(arrays=[[*a.as_row(), 2_000_000_000], [*b.as_row(), 500_000_000]])
    live.refresh()
    assert isinstance(live, Counters)  # read by the progress line and telemetry as one client's
    assert (live.dispatched, live.done, live.failed, live.in_flight, live.lag_ns) == (15, 12, 1, 3, 900)
    assert live.cpu_s == 2.0


def test_a_published_row_is_the_counters_then_the_cpu_in_live_fields_order():
    c = Counters(dispatched=4, done=3, failed=2, in_flight=1, lag_ns=77, t0_ns=5)
    row = live_row(c)
    assert LIVE_FIELDS == (*COUNTER_ROW, "cpu_ns") and len(row) == len(LIVE_FIELDS)
    assert row[:-1] == [4, 3, 2, 1, 77] and row[-1] > 0  # t0_ns is not published
