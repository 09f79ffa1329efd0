"""Issue 34 item 3: at 50 req/s of short requests against the mock, the evidence printed "client in
flight mean 1.0, max 1" beside the console's exact peak of 4 — a mean over only the samples with
something in flight, and a sampled max. Means are time averages over the run window; the max is
the exact peak from the records where the result gives one, with the sampled max beside it."""

from __future__ import annotations

from diag_timelines import make_timeline

from servelab.diagnose.decide import diagnose
from servelab.diagnose.evidence import evidence, facts_from_result

RESULT = {"completed": 400, "duration": 8.0, "request_rate": 50.0, "max_concurrent_requests": 4}


def sparse(i: int) -> dict:
    """32 ticks; one of them caught a request in flight."""
    return {"in_flight": 1 if i == 5 else 0, "waiting": 0, "cpu": 0.05, "lag_ms": 0.1}


def test_means_are_over_the_run_window_and_the_max_is_the_exact_peak():
    tl = make_timeline(n=32, client=sparse, engine=lambda i: {"running": 1.0 if i == 5 else 0.0, "waiting": 0.0})
    d = diagnose(evidence(facts_from_result(RESULT), tl))
    assert "client in flight mean 0.03, max 4 (exact, from the records; sampled 1; no cap), " \
           "waiting for a slot mean 0.0" in d.checked
    assert any(x.startswith("engine running mean 0.03, max 1;") for x in d.checked)
    assert "client in flight at most 4 (exact, from the records; sampled 1), no cap" in d.top.summary


def test_without_an_exact_peak_the_max_says_it_was_sampled():
    tl = make_timeline(n=32, client=sparse)
    d = diagnose(evidence(facts_from_result({k: v for k, v in RESULT.items() if k != "max_concurrent_requests"}), tl))
    assert "client in flight mean 0.03, max 1 (sampled; no cap), waiting for a slot mean 0.0" in d.checked
