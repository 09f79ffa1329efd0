"""Metric formulas on hand-built records with exact integer nanoseconds."""

import pytest

from servelab.metrics.summary import itl_ns, peak_concurrency, peak_output_per_s, summarize, tpot_ns
from servelab.records import RequestRecord

MS = 1_000_000


def rec(sent, tokens, out=None, counts=(), prompt=10, done=None, error=None, dispatched=None, rid="r"):
    return RequestRecord(
        request_id=rid, prompt_len=prompt, expected_output_len=None, intended_ns=dispatched or sent,
        dispatched_ns=dispatched or sent, sent_ns=sent, done_ns=done or (tokens[-1] if tokens else sent),
        token_ns=tuple(tokens), token_counts=tuple(counts) or (1,) * len(tokens),
        output_tokens=len(tokens) if out is None else out, error=error)


def test_ttft_e2el_tpot_itl_exact():
    r = rec(100, [110, 130, 160])
    assert r.ttft_ns == 10 and r.e2el_ns == 60
    assert tpot_ns(r) == (60 - 10) / 2
    assert itl_ns(r) == [20, 30]


def test_tpot_only_for_more_than_one_token():
    assert tpot_ns(rec(0, [5])) is None


def test_itl_split_by_token_counts_when_events_carry_several_tokens():
    r = rec(0, [10, 40, 50], out=6, counts=(1, 3, 2))
    assert itl_ns(r) == [10, 10, 10, 5, 5]


def test_summary_throughputs_exclude_failures():
    ok1 = rec(0, [10 * MS, 20 * MS], prompt=5)
    ok2 = rec(0, [30 * MS], prompt=7)
    bad = rec(0, [], error="HTTP 500", prompt=100)
    s = summarize([ok1, ok2, bad], duration_ns=2_000_000_000, percentiles=(50, 99))
    assert (s.completed, s.failed, s.total_input, s.total_output) == (2, 1, 12, 3)
    assert s.request_throughput == 1.0
    assert s.output_throughput == 1.5 and s.total_token_throughput == 7.5
    assert s.stats_ms["ttft"].mean == 20.0 and s.stats_ms["ttft"].median == 20.0
    assert s.stats_ms["ttft"].std == 10.0  # population std
    assert s.stats_ms["e2el"].percentiles == ((50.0, 25.0), (99.0, pytest.approx(29.9)))
    assert s.stats_ms["itl"].mean == 10.0 and s.stats_ms["tpot"].mean == 10.0


def test_empty_lists_report_zero_like_vllm():
    s = summarize([rec(0, [], error="x")], duration_ns=10**9)
    assert s.completed == 0 and s.stats_ms["ttft"].mean == 0.0 and s.stats_ms["itl"].percentiles == ((99.0, 0.0),)


def test_goodput_counts_requests_meeting_every_slo():
    fast = rec(0, [5 * MS, 10 * MS])  # ttft 5, tpot 5, e2el 10
    slow = rec(0, [50 * MS, 60 * MS])  # ttft 50
    one = rec(0, [8 * MS])  # tpot counts as 0
    s = summarize([fast, slow, one], duration_ns=10**9, goodput_slo_ms={"ttft": 10, "tpot": 5})
    assert s.request_goodput == 2.0


def test_peak_output_bins_are_one_second_from_first_send_weighted_by_tokens():
    a = rec(0, [100 * MS, 900 * MS, 1_100 * MS], counts=(1, 2, 1), out=4)
    b = rec(500 * MS, [999 * MS])
    assert peak_output_per_s([a, b]) == 4.0  # bin 0 holds 1 + 2 + 1


def test_peak_concurrency_half_open_intervals_never_double_count():
    a = rec(0, [10], done=10)
    b = rec(10, [20], done=20)  # starts exactly when a ends
    c = rec(5, [15], done=15)
    assert peak_concurrency([a, b, c]) == 2


def test_queue_time_is_dispatch_to_send():
    r = rec(30, [40], dispatched=10)
    s = summarize([r], duration_ns=10**9)
    assert r.queue_ns == 20 and s.stats_ms["client_queue_time"].mean == 20 / MS
    assert s.stats_ms["e2el_including_client_queue"].mean == 30 / MS
