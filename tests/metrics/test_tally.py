"""The compact tally: records rebuilt exactly, and the summary's figures from it equal to the
definitions on the records themselves (exact integer nanoseconds, hand-built records)."""

import dataclasses

import numpy as np
import pytest

from servelab.metrics import summary as summary_module
from servelab.metrics.summary import itl_ns, stat, summarize, tally_of
from servelab.metrics.tally import Tally
from servelab.records import RequestRecord

S = 1_000_000_000


def rec(rid, sent, tokens, counts=(), out=None, error=None, text="", finished=True, source="usage"):
    return RequestRecord(
        request_id=rid, prompt_len=7, expected_output_len=5, intended_ns=sent - 3, dispatched_ns=sent - 2,
        sent_ns=sent, done_ns=(tokens[-1] if tokens else sent) + 1, token_ns=tuple(tokens),
        token_counts=tuple(counts) or (1,) * len(tokens), output_tokens=len(tokens) if out is None else out,
        output_tokens_source=source, generated_text=text, error=error, http_status=None if error else 200,
        finished=finished)


def mixed() -> list[RequestRecord]:
    return [
        rec("a", 100, [110, 130, 160], text="abc"),
        rec("b", 50, [60, 60 + 5 * S, 60 + 5 * S + 7], text="gap over 2**32 ns"),  # kept apart, exactly
        rec("c", 0, [10, 40, 50], counts=(1, 3, 2), out=6, source="tokenizer"),  # several tokens per event
        rec("d", 70, [80, 90], error="connection closed mid-stream"),  # failed, with events
        rec("e", 20, [], error="HTTP 500 Internal Server Error"),
        rec("f", 5, [25], finished=False),
    ]


def test_every_record_is_rebuilt_exactly_with_its_text_when_detailed():
    records = mixed()
    tally = Tally(records, detailed=True)
    for i in (3, 0, 5, 1, 4, 2):  # in any order, as requests complete
        tally.add(i, records[i])
    assert tally.records() == records
    plain = Tally(records)
    for i, r in enumerate(records):
        plain.add(i, r)
    assert [r.generated_text for r in plain.records()] == [""] * 6  # texts only when detailed


def test_reads_for_the_result():
    t = tally_of(mixed())
    assert list(t.lag_ns()) == [1] * 6
    assert t.sources() == ["tokenizer", "usage"] and t.unfinished() == 1
    assert t.failures() == [("d", "connection closed mid-stream"), ("e", "HTTP 500 Internal Server Error")]


def test_later_features_fields_round_trip_and_are_read_without_rebuilding_every_record():
    """Usage prompt counts, reasoning instants and a multi-turn turn survive the tally."""
    records = [*mixed(), dataclasses.replace(rec("g", 30, [40, 55, 70]), prompt_len_source="usage",
                                             first_reasoning_ns=40, first_answer_ns=70, conversation_id="c3", turn=2)]
    t = Tally(records, detailed=True)
    for i, r in enumerate(records):
        t.add(i, r)
    assert t.records() == records
    assert t.prompt_sources() == ["dataset", "usage"]
    assert t.records_with("first_reasoning_ns") == [records[6]]
    assert t.dispatched_ns(6, default=-1) == 28 and Tally(records).dispatched_ns(6, default=-1) == -1


def test_token_instants_rebuilt_from_gaps_with_their_token_counts():
    records = mixed()
    t = tally_of(records)
    ok = np.array([0, 1, 2, 5])
    times, weights = t.token_instants(ok)
    assert times.tolist() == [x for i in ok for x in records[i].token_ns]
    assert weights.tolist() == [c for i in ok for c in records[i].token_counts]


def test_peak_output_bins_match_a_count_by_hand():
    records = mixed()
    bins = tally_of(records).peak_bins(0)
    by_hand = {}
    for r in (records[i] for i in (0, 1, 2, 5)):
        for t, k in zip(r.token_ns, r.token_counts):
            by_hand[t // S] = by_hand.get(t // S, 0) + k
    assert {b: int(v) for b, v in enumerate(bins) if v} == by_hand


def test_summary_of_the_tally_is_the_definitions_on_the_records():
    records = mixed()
    s = summarize(records, duration_ns=2 * S, percentiles=(50, 90, 99))
    ok = [r for r in records if r.success]
    assert (s.completed, s.failed, s.itl_rule) == (4, 2, "split-by-tokens")
    assert s.stats_ms["itl"] == stat([g / 1e6 for r in ok for g in itl_ns(r)], (50, 90, 99))
    assert s.stats_ms["ttft"] == stat([r.ttft_ns / 1e6 for r in ok], (50, 90, 99))
    # c was never sent (sent 0); f and e overlap at 20, b and d at 70, b and a at 100
    assert s.max_concurrent_requests == 2


def test_the_lean_itl_statistics_equal_numpy_on_a_big_pool(monkeypatch):
    rng = np.random.default_rng(7)
    records = []
    for i in range(300):  # gaps spread over many 16-bit high halves, and many sharing one
        gaps = rng.integers(1, 40_000_000 if i % 2 else 70_000, size=int(rng.integers(1, 40)))
        tokens = (10 + np.concatenate([[0], np.cumsum(gaps)])).tolist()
        records.append(rec(f"r{i}", 0, tokens))
    plain = summarize(records, S, percentiles=(1, 25, 50, 75, 99, 99.9)).stats_ms["itl"]
    monkeypatch.setattr(summary_module, "_LEAN_ITL", 0)  # the path a 500k-request run takes
    monkeypatch.setattr(summary_module, "_SLICE", 97)  # read in slices that cut through requests
    lean = summarize(records, S, percentiles=(1, 25, 50, 75, 99, 99.9)).stats_ms["itl"]
    assert lean.median == plain.median and lean.percentiles == plain.percentiles
    assert lean.mean == pytest.approx(plain.mean, rel=1e-12) and lean.std == pytest.approx(plain.std, rel=1e-9)


def test_peak_concurrency_equals_the_edge_sweep_on_random_intervals_with_ties():
    rng = np.random.default_rng(3)
    records = []
    for i in range(400):
        sent = int(rng.integers(1, 60))  # few distinct instants: many starts and ends coincide
        done = sent + int(rng.integers(0, 20))
        records.append(RequestRecord(f"r{i}", 1, 1, sent, sent, sent, done, (done,), (1,), 1))
    edges = sorted([(r.sent_ns, 1) for r in records] + [(r.done_ns, -1) for r in records])
    level = peak = 0
    for _, step in edges:
        level += step
        peak = max(peak, level)
    assert summarize(records, S).max_concurrent_requests == peak
