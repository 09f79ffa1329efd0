"""Multi-turn runs: TTFT by turn, and what the conversations did.

TTFT of turn k is over the successful requests that were turn k of their conversation
(0-based). With prefix caching, later turns re-send earlier ones as their prefix, so their
TTFT grows far less than their prompt; the engine's prefix-cache hit rate (measured by
telemetry, ``vllm:prefix_cache_hits`` / ``vllm:prefix_cache_queries``) says why.
"""

from __future__ import annotations

from collections import defaultdict

from servelab.metrics.summary import NS_PER_MS, stat
from servelab.records import RequestRecord


def ttft_by_turn(records: list[RequestRecord], percentiles) -> list[dict]:
    by_turn: dict[int, list[RequestRecord]] = defaultdict(list)
    for r in records:
        if r.turn is not None and r.success:
            by_turn[r.turn].append(r)
    rows = []
    for turn in sorted(by_turn):
        rs = by_turn[turn]
        s = stat([r.ttft_ns / NS_PER_MS for r in rs], percentiles)
        rows.append({"turn": turn, "requests": len(rs), "mean_prompt_tokens": sum(r.prompt_len for r in rs) / len(rs),
                     "mean_ms": s.mean, "median_ms": s.median, **{f"p{p:g}_ms": v for p, v in s.percentiles}})
    return rows


def turns_lines(section: dict) -> list[str]:
    hit = section.get("prefix_cache_hit_rate")
    hit_text = "not reported by the engine" if hit is None else f"{hit:.1%}"
    head = (f"servelab: multi-turn: {section['conversations']} conversations, {section['turns_sent']} turns sent"
            f" ({section['abandoned_turns']} abandoned after a failure); history "
            f"{'full' if section['history'] else 'none'}, think time {section['think_time_s']:g} s; "
            f"prefix cache hit rate {hit_text}")
    rows = " · ".join(f"t{row['turn']} {row['mean_ms']:.2f} ({row['requests']})" for row in section["ttft_by_turn"])
    return [head, f"servelab: mean TTFT by turn, ms (requests): {rows}"]
