"""The common window on hand-built records: exact integer arithmetic."""

from servelab.metrics.noise import NOISE, UNKNOWN, WORSE, Spread, verdict
from servelab.metrics.window import Edges, Window, common_window, count, edges, efficiency
from servelab.records import RequestRecord


def rec(sent, tokens, counts=(), error=None):
    return RequestRecord(request_id=f"r{sent}", prompt_len=1, expected_output_len=len(tokens), intended_ns=sent,
                         dispatched_ns=sent, sent_ns=sent, done_ns=(tokens or (sent,))[-1], token_ns=tuple(tokens),
                         token_counts=tuple(counts), output_tokens=sum(counts) or len(tokens), error=error)


def test_edges_closed_loop():
    # two slots, sent at 0; the first finishes at 40, the second's first token comes at 30
    records = [rec(0, (10, 20, 40)), rec(0, (30, 50, 60)), rec(41, (70, 80)), rec(60, (90, 100))]
    assert edges(records) == Edges(ramp_end_ns=40, drain_start_ns=60)


def test_ramp_end_waits_for_a_late_first_token_of_the_opening_burst():
    records = [rec(0, (5, 10)), rec(0, (50, 60)), rec(10, (20, 30))]
    # first done at 10; sent at or before 10: all three; the latest first token is 50
    assert edges(records).ramp_end_ns == 50


def test_edges_ignore_failures_for_ramp_but_count_their_sends():
    records = [rec(0, (10, 20)), rec(0, (), error="boom"), rec(90, (), error="refused")]
    assert edges(records) == Edges(20, 90)
    assert edges([rec(0, (), error="x")]) is None


def test_common_window_is_latest_ramp_to_earliest_drain():
    w = common_window([Edges(100, 900), Edges(300, 700), Edges(200, 1000)])
    assert w == Window(300, 700)
    assert not w.empty and w.length_s == 400e-9
    assert common_window([Edges(500, 400)]).empty


def test_count_splits_a_straddling_request_and_weights_multi_token_events():
    w = Window(100, 200)
    records = [
        rec(0, (50, 100, 150, 199, 200)),  # 3 events inside (100, 150, 199); 200 is the open end
        rec(0, (120, 180), counts=(3, 2)),  # wholly inside, 5 tokens, completes inside
        rec(0, (10, 20)),  # wholly before: cut
        rec(0, (150,), error="aborted"),  # failed: counted nowhere
    ]
    c = count(records, w)
    assert (c.tokens, c.requests, c.tokens_cut, c.requests_cut) == (8, 1, 4, 2)
    assert c.length_s == 100e-9
    assert c.output_tok_s == 8 / 100e-9 and c.req_s == 1 / 100e-9


def test_empty_window_counts_nothing_at_zero_rate():
    c = count([rec(0, (10, 20))], Window(50, 40))
    assert (c.tokens, c.tokens_cut, c.output_tok_s) == (0, 2, 0.0)


def test_efficiency():
    assert efficiency(190.0, 2, 100.0) == 0.95
    assert efficiency(10.0, 2, 0.0) is None


def test_noise_rule_as_compare_applies_it():
    alone = Spread((100.0, 102.0))
    assert verdict(alone, Spread((99.0, 101.0)), True) == NOISE
    assert verdict(alone, Spread((80.0, 85.0)), True) == WORSE
    assert verdict(Spread((100.0,)), Spread((80.0, 85.0)), True) == UNKNOWN


def test_token_rate_bins_from_t0():
    from servelab.metrics.window import token_rate

    records = [rec(0, (5, 15, 16), counts=(1, 2, 1)), rec(0, (25, 99)), rec(0, (7,), error="x")]
    # 10 ns bins: [0,10) 1 token, [10,20) 3, [20,30) 1; 99 is past the 3 bins
    assert token_rate(records, 0, 10, 3) == [1e8, 3e8, 1e8]
