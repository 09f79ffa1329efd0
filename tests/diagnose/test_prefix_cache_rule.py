"""prefix-cache-eviction (diagnose/prefix_cache.py): an agentic run's measured hit rate well
below the trace's ideal, named as eviction only with its cause in the evidence."""

from __future__ import annotations

from diag_timelines import client_at, engine_at, make_timeline, run

from servelab.diagnose.evidence import SessionCache, facts_from_result, session_cache


def cache(measured: float, ideal: float = 0.6, footprint: int = 4000) -> SessionCache:
    return SessionCache(measured, ideal, 16, 10_000, footprint)


def eviction(d):
    return next((v for v in d.verdicts if v.id == "prefix-cache-eviction"), None)


def test_a_full_cache_that_finds_well_below_the_ideal_evicts_what_the_sessions_reuse():
    tl = make_timeline(client=client_at(8), engine=engine_at(8, 0, kv=0.95))
    v = eviction(run(tl, max_concurrency=8, kv_cache_tokens=65_536, session_cache=cache(0.35)))
    assert v is not None and v.confidence == 0.6
    assert v.evidence["hit_tokens_lost"] == 2500 and v.evidence["kv_usage_max"] == 0.95
    assert v.summary == ("The prefix cache evicts blocks the trace reuses: it found 35.0% of prompt tokens against "
                         "the trace's ideal 60.0% (block size 16), 2,500 tokens computed again; the cache was full "
                         "(KV usage max 95%).")
    assert "--max-concurrency" in v.next


def test_a_trace_larger_than_the_cache_evicts_even_with_the_cache_half_empty():
    tl = make_timeline(client=client_at(1), engine=engine_at(1, 0, kv=0.4))
    v = eviction(run(tl, max_concurrency=1, kv_cache_tokens=2048, session_cache=cache(0.2, footprint=4000)))
    assert v is not None and "the trace puts 4,000 tokens in a cache of 2,048" in v.summary


def test_no_eviction_is_claimed_near_the_ideal_or_without_its_cause():
    full = make_timeline(client=client_at(8), engine=engine_at(8, 0, kv=0.95))
    roomy = make_timeline(client=client_at(8), engine=engine_at(8, 0, kv=0.3))
    assert eviction(run(full, kv_cache_tokens=65_536, session_cache=cache(0.57))) is None  # 3 points: noise
    # well below, but the cache had room and holds the whole trace: another cause (caching off, re-tokenized)
    assert eviction(run(roomy, kv_cache_tokens=65_536, session_cache=cache(0.2))) is None
    assert eviction(run(full, kv_cache_tokens=65_536)) is None  # not an agentic run: no ideal to hold it to


def test_the_facts_come_from_the_results_agentic_section():
    agentic = {"measured_prefix_cache_hit_rate": 0.2, "ideal_prefix_cache_hit_rate": 0.5, "ideal_at_block_size": 32,
               "input_tokens": 1000, "output_tokens": 100}
    assert session_cache(agentic) == SessionCache(0.2, 0.5, 32, 1000, 600)
    assert session_cache({**agentic, "measured_prefix_cache_hit_rate": None}) is None  # unknown: no finding
    facts = facts_from_result({"completed": 1, "duration": 1.0, "servelab": {"agentic": agentic}})
    assert facts.session_cache == SessionCache(0.2, 0.5, 32, 1000, 600)
