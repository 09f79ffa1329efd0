"""An agentic run's prefix cache: the engine's measured hit rate beside the trace's ideal.

Both are hit tokens / prompt tokens. The ideal (datasets/agentic.ideal_hits: an unbounded
cache seeing every call's prompt in call order) depends on the block size, so it is worked
out at the engine's own, read from what the run knows of the engine, first found first:

    engine metrics   the ``block_size`` label of ``vllm:cache_config_info`` in the run's
                     telemetry (vLLM, the sim server, the fast mode's timeline)
    memory report    the same label as the engine's start read it (a study's engine)
    engine args      ``--block-size`` in the engine's args (a study's, the fast mode's)
    assumed          vLLM's default, 16, said to be assumed

The measured rate is the fast-mode simulator's own block manager's counters when it ran,
else the engine's ``prefix_cache_hits`` / ``prefix_cache_queries`` increase over the run
(telemetry/summary.py: the ready check's and warm-ups' probes, sent before t0, may fall on
either side of the first sample), else unknown (no telemetry, an engine without them).
"""

from __future__ import annotations

from servelab.loadgen.sessions import Agentic, summary_line
from servelab.telemetry.summary import increase
from servelab.telemetry.timeline import Timeline

ASSUMED_BLOCK_SIZE = 16  # vLLM's default --block-size
# A cold cache cannot beat the ideal: with chained block hashes an unbounded cache hits every block
# but its first sight, whatever the order, and calls in flight together can only miss more. A
# measured rate above it (by more than rounding) had this trace's blocks cached before t0.
WARM_MARGIN = 0.005


def engine_block_size(timeline: Timeline | None, engine: dict | None) -> tuple[int, str]:
    """The engine's KV block size and where it was read (the module's docstring)."""
    engine = engine or {}
    found = [((timeline.header.get("engine") or {}).get("cache_config") or {}).get("block_size")
             if timeline is not None else None,
             (engine.get("memory_report") or {}).get("block_size"), _arg(engine.get("args") or [], "--block-size")]
    for value, source in zip(found, ("engine metrics (vllm:cache_config_info)", "engine memory report",
                                     "engine args (--block-size)")):
        if value is not None and str(value).isdigit() and int(value) > 0:
            return int(value), source
    return ASSUMED_BLOCK_SIZE, "assumed (vLLM's default; the engine did not say)"


def _arg(args: list, flag: str) -> str | None:
    args = [str(a) for a in args]
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def measured(timeline: Timeline | None, simulated: dict | None) -> dict:
    """The engine's hit tokens, prompt tokens and rate over the run, and where they came from."""
    counters = (simulated or {}).get("counters") or {}
    if counters.get("prefix_cache_queries"):
        hits, queries, source = counters["prefix_cache_hits"], counters["prefix_cache_queries"], \
            "the simulator's block manager"
    elif timeline is not None and (queries := increase(timeline, "prefix_queries")):
        hits, source = increase(timeline, "prefix_hits") or 0, "engine metrics (prefix_cache_hits / queries)"
    else:
        return {"rate": None, "hits": None, "queries": None, "source": "unknown: no prefix-cache counters read"}
    return {"rate": round(hits / queries, 4), "hits": int(hits), "queries": int(queries), "source": source}


def complete(agentic: Agentic, timeline: Timeline | None, context: dict) -> dict:
    """The result's ``agentic`` section with the ideal at the engine's block size and the
    measured rate beside it; its console line is printed. ``context``: the run's engine
    (``engine``) and, simulated, the simulator's section (``simulated``)."""
    size, source = engine_block_size(timeline, context.get("engine"))
    got = measured(timeline, context.get("simulated"))
    section = {**agentic.section(size), "block_size_source": source,
               "measured_prefix_cache_hit_rate": got["rate"], "measured_prefix_cache": got}
    section["cache_warm_before_run"] = got["rate"] is not None and \
        got["rate"] > section["ideal_prefix_cache_hit_rate"] + WARM_MARGIN
    print(line(section), flush=True)
    return section


def line(section: dict) -> str:
    """The sessions' console line, its last words the measured rate beside the ideal."""
    head = summary_line(section)
    assumed = " (assumed)" if section["block_size_source"].startswith("assumed") else ""
    rate = section["measured_prefix_cache_hit_rate"]
    got = f"{rate:.1%} measured ({section['measured_prefix_cache']['source']})" if rate is not None else \
        "measured: unknown (no prefix-cache counters read)"
    if section.get("cache_warm_before_run"):
        got += (", above the ideal: the cache held this trace's blocks before the run (an earlier run's); "
                "reset it between runs, as studies do, to measure this one alone")
    return f"{head}{assumed}; {got}"
