"""The steady state on hand-built records: the window rule per load shape, exact counts."""

from servelab.metrics import steady
from servelab.metrics.summary import tally_of
from servelab.records import RequestRecord

MS = 1_000_000


def rec(sent_ms, tokens_ms, prompt=10):
    tokens = tuple(int(t * MS) for t in tokens_ms)
    return RequestRecord(request_id=f"r{sent_ms}-{tokens_ms[0]}", prompt_len=prompt, expected_output_len=len(tokens),
                         intended_ns=int(sent_ms * MS), dispatched_ns=int(sent_ms * MS), sent_ns=int(sent_ms * MS),
                         done_ns=tokens[-1], token_ns=tokens, output_tokens=len(tokens))


def test_shapes_from_the_load():
    assert steady.shape_of(10.0, None, None) == "rate" and steady.shape_of(10.0, 4, None) == "rate"
    assert steady.shape_of(float("inf"), 4, None) == "closed"
    assert steady.shape_of(float("inf"), None, None) == "burst"
    assert steady.shape_of(float("inf"), None, "linear") == "ramp"


def test_closed_loop_window_counts_and_latency(monkeypatch):
    monkeypatch.setattr(steady, "MIN_PLATEAU_REQUESTS", 1)  # the counting, on a window the length rule
    monkeypatch.setattr(steady, "MIN_PLATEAU_LIFETIMES", 0)  # would call too short (its own test below)
    # two slots from t0; the first completes at 40 ms (the other's first token came at 30): ramp end 40;
    # last send at 60: drain start 60. In [40, 60): tokens at 40, 50, 45, 50; requests ending at 40 and 50
    records = [rec(0, (10, 20, 40)), rec(0, (30, 50, 60)), rec(41, (45, 50)), rec(60, (70, 80))]
    s = steady.steady_state(tally_of(records), 0, "closed", [50])
    assert (s["start_s"], s["end_s"], s["length_s"]) == (0.04, 0.06, 0.02)
    assert (s["output_tokens"], s["tokens_cut"], s["requests"], s["requests_cut"]) == (4, 6, 2, 2)
    assert s["output_tok_s"] == 4 / 0.02 and s["req_s"] == 2 / 0.02 and s["total_tok_s"] == (4 + 20) / 0.02
    lat = s["latency_ms"]  # the two completed inside: TTFT 10 and 4, E2EL 40 and 9, TPOT 15 and 5
    assert lat["ttft"] == {"mean": 7.0, "p50": 7.0} and lat["e2el"]["p50"] == 24.5 and lat["tpot"]["p50"] == 10.0


def test_burst_has_no_plateau_and_no_number():
    s = steady.steady_state(tally_of([rec(0, (10, 20))]), 0, "burst", [50])
    assert s == {"shape": "burst", "plateau": False, "why": steady.BURST}
    assert steady.lines(s) == [f"servelab: steady state: none — {steady.BURST}"]


def test_a_drain_before_the_ramp_end_is_no_plateau():
    records = [rec(0, (10, 100)), rec(5, (90, 95))]  # last send at 5 ms, first completion at 95
    s = steady.steady_state(tally_of(records), 0, "rate", [50])
    assert not s["plateau"] and "drain began" in s["why"]


def ramp(rates_per_10ms: list[int]) -> list[RequestRecord]:
    """One request per token, each 10 ms bin delivering the given count; sent just before."""
    out = []
    for b, n in enumerate(rates_per_10ms):
        out += [rec(b * 10, (b * 10 + (i + 0.5) * 10 / n,)) for i in range(n)]
    return out


def test_ramp_plateau_starts_after_the_rise():
    # rises for 20 bins (5 → 100 tokens per 10 ms), then holds 100 for 40 bins
    records = ramp([5 * (i + 1) for i in range(20)] + [100] * 40)
    s = steady.steady_state(tally_of(records), 0, "ramp", [50])
    assert s["plateau"] and abs(s["output_tok_s"] / 10_000 - 1) < 0.005  # 100 per 10 ms
    assert 0.17 < s["start_s"] < 0.26  # a rise linear in time: from the first bin within 10 % of the level


def test_a_ramp_that_never_levels_has_no_plateau():
    s = steady.steady_state(tally_of(ramp([5 * (i + 1) for i in range(40)])), 0, "ramp", [50])
    assert not s["plateau"] and s["why"].startswith("the ramp never reached what the engine serves")


def closed_loop(slots: int, rounds: int, life_ms: int) -> list[RequestRecord]:
    """``slots`` slots, staggered over one life, each running ``rounds`` requests of ``life_ms``
    back to back (4 tokens each)."""
    out = []
    for j in range(slots):
        for r in range(rounds):
            t = j * life_ms / slots + r * life_ms
            out.append(rec(t, tuple(t + life_ms / 4 * (k + 1) for k in range(4))))
    return out


def test_a_window_too_short_to_judge_says_so_and_gives_no_number():
    # 4 slots × 3 rounds of 100 ms: the window (ramp-up's end 125 ms → last send 275 ms) holds
    # 6 completions: too few requests, and shorter than 2 lives
    s = steady.steady_state(tally_of(closed_loop(4, 3, 100)), 0, "closed", [50])
    assert s == {"shape": "closed", "plateau": False, "why": s["why"]}
    assert s["why"] == ("too short to judge: 0.15 s with 6 requests completed in it; a plateau is judged only over "
                        "≥ 20 requests completed in it and ≥ 2 × their median E2EL (0.20 s here)")
    assert steady.lines(s) == [f"servelab: steady state: none — {s['why']}"]
    # 40 slots: 69 requests in it, still shorter than 2 lives (0.17 s against 0.20 s)
    s = steady.steady_state(tally_of(closed_loop(40, 3, 100)), 0, "closed", [50])
    assert not s["plateau"] and s["why"].startswith("too short to judge: 0.17 s with 69 requests")


def test_a_window_of_enough_requests_and_lives_is_a_plateau_with_its_rule_stated():
    s = steady.steady_state(tally_of(closed_loop(8, 6, 100)), 0, "closed", [50])  # 0.46 s, 37 requests
    assert s["plateau"] and s["requests"] == 37 and s["length_s"] > 2 * 0.1
    assert s["rule"].endswith("; judged only over ≥ 20 requests completed in it and ≥ 2 × their median E2EL")
