"""What servelab reports beyond ``vllm bench serve``'s block, each only when it applies:
multi-turn (TTFT by turn, the engine's prefix-cache hit rate), reasoning (time to the
first reasoning and first answer token), goodput in tokens and SLO attainment per metric.
Each is a section of the result's ``servelab`` dict and a few console lines."""

from __future__ import annotations

from servelab.config import BenchSpec
from servelab.metrics.goodput import goodput_lines, goodput_section
from servelab.metrics.reasoning import reasoning_lines, reasoning_section
from servelab.metrics.summary import Summary
from servelab.metrics.tally import Tally
from servelab.metrics.turns import ttft_by_turn, turns_lines
from servelab.telemetry.summary import prefix_hit_rate


def beyond_vllm(spec: BenchSpec, tally: Tally, summary: Summary, replay, timeline) -> dict:
    """The sections that apply to this run; their console lines are printed here."""
    sections: dict = {}
    percentiles = list(spec.output.metric_percentiles)
    if replay is not None:
        sections["multi_turn"] = multi_turn_section(spec, tally, replay, timeline)
        _print(turns_lines(sections["multi_turn"]))
    reasoning = reasoning_section(tally.records_with("first_reasoning_ns"), percentiles)
    if reasoning is not None:
        sections["reasoning"] = reasoning
        _print(reasoning_lines(reasoning))
    if spec.output.goodput:
        duration = summary.duration_s if summary.duration_s == summary.duration_s else 0.0
        sections["goodput"] = goodput_section(tally.records(), duration, dict(spec.output.goodput))
        _print(goodput_lines(sections["goodput"]))
    return sections


def multi_turn_section(spec: BenchSpec, tally: Tally, replay, timeline) -> dict:
    multi = replay.multi
    hit = prefix_hit_rate(timeline, timeline.during("engine")) if timeline is not None else None
    return {"conversations": len({t.conversation for t in replay.turns}), "turns_sent": len(replay.turns),
            "abandoned_turns": replay.abandoned, "prompt_tokens_from": dict(replay.prompt_tokens_from),
            "history": multi.history, "think_time_s": multi.think_time_s,
            "max_turns": multi.max_turns, "arrivals": "conversation starts",
            "max_concurrency_counts": "requests in flight",
            "prefix_cache_hit_rate": hit, "prefix_cache_source": "engine /metrics (telemetry)",
            "ttft_by_turn": ttft_by_turn(tally.records(), list(spec.output.metric_percentiles))}


def _print(lines: list[str]) -> None:
    for line in lines:
        print(line)
