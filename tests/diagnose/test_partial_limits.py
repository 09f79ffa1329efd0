"""Limits that bind for part of a long-tailed run are named, with when and for how long
(issue 19 items 1 and 2); a run that offered unbounded load is never told to offer more."""

from __future__ import annotations

import math

import pytest
from diag_timelines import client_at, make_timeline, run

from servelab.diagnose.spans import Spell, spell


def burst_at_rate_inf(i: int) -> dict:
    """Item 1's shape: 1,000 requests at t0, max_num_seqs 1,024, budget 8,192. For 24 ticks
    (0–6 s) each step carries the whole budget while the queue drains and running climbs to
    844, below the cap; then 96 ticks of decode tail, no queue."""
    steps = 10.0 * (i + 1)
    if i < 24:
        return {"running": 53.0 + 33 * i, "waiting": 947.0 - 38 * i, "kv_usage": 0.1,
                "iteration_tokens_sum": 8192.0 * steps, "iteration_tokens_count": steps, "preemptions": 0.0}
    return {"running": max(1.0, 844.0 - 8 * (i - 24)), "waiting": 0.0, "kv_usage": 0.15,
            "iteration_tokens_sum": 8192.0 * 240 + 400.0 * (steps - 240), "iteration_tokens_count": steps,
            "preemptions": 0.0}


def test_item1_a_burst_held_by_the_token_budget_is_a_partial_scheduler_cap():
    tl = make_timeline(n=120, engine=burst_at_rate_inf, client=lambda i: {"in_flight": 1000 - 8 * i, "waiting": 0})
    tl.samples.insert(0, {"t_ms": -200.0, "src": "engine", "running": 0.0, "waiting": 0.0,
                          "iteration_tokens_sum": 0.0, "iteration_tokens_count": 0.0, "preemptions": 0.0})
    d = run(tl, max_num_seqs=1024, max_num_batched_tokens=8192, request_rate=math.inf)
    top = d.top
    assert top.id == "scheduler-cap" and top.evidence["limit"] == "max_num_batched_tokens"
    assert top.evidence["bound"] == {"share": 0.2, "spans_s": [[0.0, 6.0]]}
    assert "full token budget (max_num_batched_tokens 8192) with running below max_num_seqs 1024, " \
           "for 20% of the run, 0–6 s" in top.summary
    assert top.next.startswith("Raise --max-num-batched-tokens from 8192")
    assert all("offered load" not in v.next and "no queue" not in v.summary for v in d.verdicts)


def test_item2_a_cap_that_binds_for_part_of_a_long_tailed_run_is_a_partial_cap():
    """Item 2's sweep point: max_num_seqs 32 under 64 streams of 100 prompts — 32 running and
    32 waiting for the first 41 % of the run, then a tail of a few long requests."""
    engine = lambda i: ({"running": 32.0, "waiting": 32.0, "kv_usage": 0.1} if i < 41 else
                        {"running": float(max(1, 30 - (i - 41) // 2)), "waiting": 0.0, "kv_usage": 0.05})
    client = lambda i: {"in_flight": 64 if i < 41 else max(1, 30 - (i - 41) // 2), "waiting": 0}
    d = run(make_timeline(n=100, engine=engine, client=client), max_concurrency=64, max_num_seqs=32)
    top = d.top
    assert top.id == "scheduler-cap" and top.evidence["limit"] == "max_num_seqs"
    assert top.evidence["bound"] == {"share": 0.41, "spans_s": [[0.0, 10.25]]}
    assert "running sits at max_num_seqs 32, for 41% of the run, 0–10 s: then 32 waiting" in top.summary
    assert top.level == "high" and top.confidence == pytest.approx(0.9 * (0.5 + 0.5 * 0.41 / 0.6))
    assert "no cap pinned" not in top.summary


def test_a_short_burst_is_no_limit_and_the_summary_says_the_queue_it_saw():
    engine = lambda i: {"running": 4.0, "waiting": 3.0 if i < 2 else 0.0, "kv_usage": 0.1}
    d = run(make_timeline(n=40, engine=engine, client=client_at(4)), max_num_seqs=64, max_num_batched_tokens=2048,
            request_rate=5.0)
    assert d.top.id == "no-limit-found"
    assert d.top.summary.startswith("No limit held for long: requests waited at the engine for 5% of the run, "
                                    "0–0.5 s (a burst being admitted, not a limit); running at most 4 of its cap 64")
    assert "raise the offered load" in d.top.next  # a finite rate: more load is the next experiment
    assert "until a queue holds (the burst here cleared at once)" in d.top.next  # not "until something queues"


def test_no_limit_on_an_unbounded_run_asks_for_more_requests_not_more_load():
    d = run(make_timeline(engine=lambda i: {"running": 3.0, "waiting": 0.0}, client=client_at(3)),
            max_num_seqs=64, request_rate=math.inf)
    assert d.top.id == "no-limit-found" and "no queue at the engine" in d.top.summary
    assert "raise the offered load" not in d.top.next and "send more or longer requests" in d.top.next
    assert d.top.evidence["offered_unbounded"] is True


@pytest.mark.parametrize("marks, share, spans, text", [
    ([1, 1, 0, 0], 0.5, ((0.0, 0.5),), "50% of the run, 0–0.5 s"),
    ([1, 0, 1, 0], 0.5, ((0.0, 0.75),), "50% of the run, 0–0.8 s"),  # one tick apart: one span
    ([1, 0, 0, 1], 0.5, ((0.0, 0.25), (0.75, 1.0)), "50% of the run, 0–0.2 s and 0.8–1 s"),
    ([0, 0, 0, 0], 0.0, (), "0% of the run"),
])
def test_spell(marks, share, spans, text):
    s = spell([0.0, 0.25, 0.5, 0.75], [bool(m) for m in marks], 0.25)
    assert (s.share, s.spans, s.text()) == (share, spans, text)


def test_spell_lists_three_spans_then_counts():
    s = Spell(0.5, ((0, 1), (3, 4), (6, 7), (9, 10), (12, 13)))
    assert s.text() == "50% of the run, 0–1 s, 3–4 s, 6–7 s and 2 more"
