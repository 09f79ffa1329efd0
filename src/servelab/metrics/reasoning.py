"""Reasoning models: time to the first reasoning token and to the first answer token.

A chat stream of a reasoning model carries ``delta.reasoning`` (``reasoning_content`` in
older servers) before ``delta.content``. TTFT (vLLM's definition) is the first of either;
here, over the requests that streamed any reasoning:

* TTFT reasoning = first reasoning event − sent
* TTFT answer    = first answer event − sent (requests that reached an answer; one cut
                   off by max_tokens while still reasoning has none, and is counted apart)
* reasoning time = TTFT answer − TTFT reasoning

Reported only when reasoning was seen, so a plain model's result carries no such keys.
"""

from __future__ import annotations

from servelab.metrics.summary import NS_PER_MS, stat
from servelab.records import RequestRecord


def reasoning_section(records: list[RequestRecord], percentiles) -> dict | None:
    """The result's ``servelab.reasoning``, or None when no stream carried reasoning."""
    seen = [r for r in records if r.success and r.first_reasoning_ns]
    if not seen:
        return None
    answered = [r for r in seen if r.first_answer_ns]
    series = {
        "ttft_reasoning_ms": [(r.first_reasoning_ns - r.sent_ns) / NS_PER_MS for r in seen],
        "ttft_answer_ms": [(r.first_answer_ns - r.sent_ns) / NS_PER_MS for r in answered],
        "reasoning_time_ms": [(r.first_answer_ns - r.first_reasoning_ns) / NS_PER_MS for r in answered],
    }
    out: dict = {"requests": len(seen), "answered": len(answered)}
    for key, values in series.items():
        s = stat(values, percentiles)
        out[key] = {"mean": s.mean, "median": s.median, "std": s.std,
                    **{f"p{p:g}": v for p, v in s.percentiles}}
    return out


def reasoning_lines(section: dict) -> list[str]:
    def show(key: str) -> str:
        s = section[key]
        tail = " · ".join(f"{k} {v:.2f}" for k, v in s.items() if k.startswith("p"))
        return f"mean {s['mean']:.2f}, median {s['median']:.2f}" + (f", {tail}" if tail else "")

    return [f"servelab: reasoning seen in {section['requests']} requests ({section['answered']} reached an answer)",
            f"servelab: time to first reasoning token (ms): {show('ttft_reasoning_ms')}",
            f"servelab: time to first answer token (ms): {show('ttft_answer_ms')}"]
