"""A foreign run in servelab's result shape: vLLM's keys (so compare and report read it as they
read servelab's own) plus a ``servelab.foreign`` section that says where it came from and what
it cannot give.

Keys whose definition differs from vLLM's never take a vLLM key: they get their own
(``DIFFERENT``), and compare shows them on their own rows, marked.
"""

from __future__ import annotations

import math

# metric -> what it is, for the keys no vLLM-defined row may hold (``{stat}_{name}_ms``)
DIFFERENT = {
    "tpot_incl_first": "per output token incl. the first: (last token − send) ÷ output tokens "
                       "(GuideLLM's time_per_output_token_ms, the llm-d report's and inference-perf's NTPOT)",
    "itl_tool": "inter-token latency as the tool defines it (inference-perf: per token, a chunk's "
                "tokens spread over its gap; not vLLM's per-event gap)",
}

# the statistics a reader may hand over, by servelab's names
STATS = ("mean", "median", "std", "p90", "p99")


def stat_keys(name: str, stats: dict, scale: float = 1.0) -> dict:
    """``{mean_NAME_ms: …, median_NAME_ms: …}`` from ``{"mean": …, "median": …}`` (servelab's stat
    names), each × ``scale`` (1000 for seconds); an absent or non-numeric value is left out."""
    out = {}
    for stat in STATS:
        value = number(stats.get(stat))
        if value is not None:
            out[f"{stat}_{name}_ms"] = value * scale
    return out


def number(x) -> float | None:
    ok = isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
    return float(x) if ok else None


def foreign_result(tool: str, version: str | None, form: str, figures: dict, *, not_computable=(),
                   sampled: str | None = None, notes=(), label: str | None = None) -> dict:
    """``figures``: vLLM's keys (duration, completed, …, mean_ttft_ms, …) and ``DIFFERENT`` ones.
    ``not_computable``: rows servelab cannot give from this file (aggregates only)."""
    result = {k: v for k, v in figures.items() if v is not None}
    if label:
        result["label"] = label
    result.setdefault("output_throughput", None)  # the key that makes a result a result (results/runs.py)
    result["servelab"] = {"foreign": {
        "tool": tool, "version": version or "not recorded", "format": form,
        "not_computable": list(not_computable), "sampled": sampled, "notes": list(notes),
    }, "provenance": {"tool": tool, "tool_version": version or "not recorded"}}
    return result


def foreign_of(result: dict) -> dict | None:
    """The ``servelab.foreign`` section, or None for servelab's own result."""
    section = result.get("servelab")
    found = section.get("foreign") if isinstance(section, dict) else None
    return found if isinstance(found, dict) else None
