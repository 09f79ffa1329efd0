"""``scale``'s result from hand-built runs: the window, the sums, the efficiency and its verdict."""

import pytest

from servelab.errors import InputError
from servelab.records import RequestRecord
from servelab.scale.result import build, render
from servelab.scale.local import JobRun

S = 1_000_000_000


def stream(sent_s: float, first_s: float, n: int, gap_s: float) -> RequestRecord:
    tokens = tuple(int((first_s + k * gap_s) * S) for k in range(n))
    return RequestRecord(request_id=f"{sent_s}", prompt_len=1, expected_output_len=n, intended_ns=int(sent_s * S),
                         dispatched_ns=int(sent_s * S), sent_ns=int(sent_s * S), done_ns=tokens[-1], token_ns=tokens,
                         token_counts=(1,) * n, output_tokens=n)


def closed_loop(replica: int, gap_s: float, waves: int = 10) -> JobRun:
    """Two slots, back-to-back requests of 10 tokens every ``gap_s``: 2 / gap_s tok/s."""
    records = [stream(w * 10 * gap_s, w * 10 * gap_s + gap_s, 10, gap_s) for w in range(waves) for _ in range(2)]
    return JobRun(replica, records, {"completed": len(records)}, 0, 0)


ENGINES = [{"base_url": f"http://127.0.0.1:{8000 + i}"} for i in range(2)]


def test_efficiency_and_window_from_known_runs():
    alone = [closed_loop(0, 0.10), closed_loop(0, 0.099)]  # ~20 tok/s alone
    together = [closed_loop(0, 0.125), closed_loop(1, 0.125)]  # 16 tok/s each: 80 %
    r = build({"name": "t", "replicas": 2}, ENGINES, alone, together)
    w = r["together"]["window"]
    # first done at 1.25 s; the second wave, sent at that very instant, counts in the opening
    # burst: its first token (1.375 s) opens the window. It closes at the last send.
    assert (w["start_s"], w["end_s"]) == (pytest.approx(1.375), pytest.approx(11.25))
    assert [x["output_tok_s"] for x in r["together"]["replicas"]] == [pytest.approx(16.0)] * 2
    assert r["efficiency"] == pytest.approx(32.0 / (2 * r["single"]["output_tok_s"]["mean"]))
    assert r["efficiency"] == pytest.approx(0.8, abs=0.01)
    assert r["verdict"] == "below 100% beyond noise"
    text = render(r)
    assert f"scaling efficiency: {r['efficiency']:.1%} — below 100% beyond noise" in text
    assert "2 replicas, common window 9.88 s (t0+1.38 s … t0+11.25 s)" in text


def test_no_common_window_is_one_line_saying_what_to_do():
    everything_at_once = JobRun(0, [stream(0, 0.1, 5, 0.1) for _ in range(4)], {}, 0, 0)
    with pytest.raises(InputError, match="no common window.*--num-prompts well above --max-concurrency"):
        build({"name": "t", "replicas": 1}, ENGINES[:1], [everything_at_once], [everything_at_once])


def test_a_simulated_engine_says_so():
    alone = [closed_loop(0, 0.1), closed_loop(0, 0.1)]
    r = build({"name": "t", "replicas": 2}, [{**e, "kind": "sim"} for e in ENGINES], alone,
              [closed_loop(0, 0.1), closed_loop(1, 0.1)])
    assert r["simulated"] and render(r).startswith("SIMULATED: engine 'sim'")
    assert not build({"name": "t", "replicas": 2}, ENGINES, alone, alone[:1] + [closed_loop(1, 0.1)])["simulated"]
