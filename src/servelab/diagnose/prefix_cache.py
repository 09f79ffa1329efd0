"""The prefix cache evicting blocks the trace reuses: a finding for an agentic run.

An agentic run's result gives the trace's ideal prefix-cache hit rate (an unbounded cache:
every block the trace reuses is found) beside the engine's measured one
(``servelab.agentic``, measure/session_cache.py). The measured rate well below the ideal
says reused blocks were gone when their call came: evicted. It is named as eviction only
with the cause in the evidence, one of:

* the cache was full: KV usage at its peak ≥ ``KV_HIGH``, or preemptions — the running
  calls' own blocks left no room to keep the finished ones' (vLLM counts a cached block
  that no request uses as free: usage this high means little was kept);
* the trace does not fit: the tokens it puts in the cache — every prompt token it does not
  reuse, ``(1 − ideal) × input tokens``, plus its outputs — exceed the cache's size, so
  even one call at a time evicts what a later call reuses (usage can stay low then).

Otherwise the shortfall has another cause (prefix caching off, the server re-tokenizing the
prompts, probes counted in the engine's counters) and no eviction is claimed.
"""

from __future__ import annotations

from servelab.diagnose.rules import KV_HIGH, free_kv, number
from servelab.diagnose.verdict import Verdict

SHORTFALL = 0.05  # measured below the ideal by at least 5 points of prompt tokens …
SHORTFALL_SHARE = 0.10  # … and by at least a tenth of the ideal: not rounding, not a probe's dilution


def prefix_cache_eviction(ev) -> Verdict | None:
    cache, e, kv_tokens = ev.facts.session_cache, ev.engine, ev.facts.kv_cache_tokens
    if cache is None or cache.ideal - cache.measured < max(SHORTFALL, SHORTFALL_SHARE * cache.ideal):
        return None
    kv_max = max(e.kv) if e is not None and e.kv else None
    preempted = e.preemptions if e is not None else None
    full = (kv_max is not None and kv_max >= KV_HIGH) or bool(preempted)
    too_big = kv_tokens is not None and cache.footprint_tokens > kv_tokens
    if not (full or too_big):
        return None
    lost = round((cache.ideal - cache.measured) * cache.input_tokens)
    why = []
    if full:
        seen = ([f"KV usage max {kv_max:.0%}"] if kv_max is not None else []) + (
            [f"{number(preempted)} preemptions"] if preempted else [])
        why.append(f"the cache was full ({', '.join(seen)})")
    if too_big:
        why.append(f"the trace puts {cache.footprint_tokens:,} tokens in a cache of {kv_tokens:,}")
    evidence = {"measured_hit_rate": cache.measured, "ideal_hit_rate": cache.ideal, "block_size": cache.block_size,
                "hit_tokens_lost": lost, "footprint_tokens": cache.footprint_tokens, "kv_cache_tokens": kv_tokens,
                "kv_usage_max": kv_max, "preemptions": preempted}
    return Verdict("prefix-cache-eviction", 0.7 if full and too_big else 0.6,
                   f"The prefix cache evicts blocks the trace reuses: it found {cache.measured:.1%} of prompt tokens "
                   f"against the trace's ideal {cache.ideal:.1%} (block size {cache.block_size}), {lost:,} tokens "
                   f"computed again; {' and '.join(why)}.", evidence,
                   f"{free_kv(ev)} Or keep fewer sessions in flight at once (--max-concurrency, --request-rate), so a "
                   "session's blocks outlive its tool waits.")
