"""A timeline, summarized for the result's ``servelab.telemetry`` section.

Statistics are over the samples taken during the run (0 ≤ t ≤ duration); the
sampler ticks evenly, so a sample mean is a time average. Counters are reported
as their increase over the run, from the last sample at or before t0 to the first
after the end.
"""

from __future__ import annotations

import bisect
import statistics
from collections import Counter
from itertools import pairwise

from servelab.metrics.energy import cumulative_j, joules_between
from servelab.telemetry.timeline import Timeline


def values(samples: list[dict], field: str) -> list[float]:
    return [s[field] for s in samples if s.get(field) is not None]


def stats(xs: list[float]) -> dict | None:
    if not xs:
        return None
    return {"mean": round(statistics.fmean(xs), 4), "median": round(statistics.median(xs), 4),
            "max": round(max(xs), 4)}


def increase(timeline: Timeline, field: str, src: str = "engine") -> float | None:
    """A counter's increase over the run: the sum of its positive steps (a server
    restart resets a counter to 0; that step is skipped, not subtracted), from the
    last sample at or before t0 to the first one after the end (the scraper's closing
    sample: the run's requests are all counted by then)."""
    good = [s for s in timeline.of(src) if s.get(field) is not None]
    end = timeline.duration_ms
    before = [s for s in good if s["t_ms"] <= 0.0]
    inside = [s for s in good if 0.0 < s["t_ms"] <= end]
    after = [s for s in good if s["t_ms"] > end]
    series = before[-1:] + inside + after[:1]
    if len(series) < 2:
        return None
    return sum(max(0.0, b[field] - a[field]) for a, b in pairwise(series))


def ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def summarize(timeline: Timeline) -> dict:
    return {"interval_s": timeline.header.get("interval_s"),
            "samples": {src: len(timeline.during(src)) for src in ("engine", "gpu", "client")},
            "engine": engine_summary(timeline), "client": client_summary(timeline),
            "gpu": gpu_summary(timeline)}


def engine_summary(timeline: Timeline) -> dict:
    head = timeline.header.get("engine") or {}
    if head.get("status") != "ok":
        return {"status": "absent", "detail": head.get("detail")}
    s, duration_s = timeline.during("engine"), timeline.duration_ms / 1000.0
    gen = increase(timeline, "generation_tokens")
    out = {"status": "ok", "names": head.get("names", {})}
    out.update({f: stats(values(s, f)) for f in ("running", "waiting", "kv_usage")})
    out.update({"preemptions": increase(timeline, "preemptions"),
                "prompt_tokens": increase(timeline, "prompt_tokens"), "generation_tokens": gen,
                "generation_tok_s": ratio(gen, duration_s),
                "prefix_cache_hit_rate": prefix_hit_rate(timeline, s),
                # mean tokens per engine step = Δ histogram sum / Δ histogram count
                "tokens_per_step": ratio(increase(timeline, "iteration_tokens_sum"),
                                         increase(timeline, "iteration_tokens_count"))})
    return out


def prefix_hit_rate(timeline: Timeline, during: list[dict]) -> float | None:
    """Share of prompt tokens served from the prefix cache during the run, from what the
    engine exposes: vLLM V1's hit/query token counters; else llama.cpp's cached prompt
    tokens (its prompt_tokens leaves them out, so cached / (prompt + cached)); else V0's
    hit-rate gauge, last value in the run (a rate since the engine started, not this run's)."""
    hits, queries = increase(timeline, "prefix_hits"), increase(timeline, "prefix_queries")
    if queries:
        return ratio(hits, queries)
    names = (timeline.header.get("engine") or {}).get("names") or {}
    if str(names.get("prompt_tokens_cached", "")).startswith("llamacpp:"):
        cached, prompt = increase(timeline, "prompt_tokens_cached"), increase(timeline, "prompt_tokens")
        if cached is not None and prompt is not None:
            return ratio(cached, cached + prompt)
    gauge = values(during, "prefix_hit_rate_gauge")
    return gauge[-1] if gauge else None


def client_summary(timeline: Timeline) -> dict:
    s = timeline.during("client")
    return {"in_flight": stats(values(s, "in_flight")), "waiting": stats(values(s, "waiting")),
            "schedule_lag_ms_max": max(values(s, "lag_ms"), default=None),
            "cpu": stats(values(s, "cpu"))}


def gpu_summary(timeline: Timeline) -> dict:
    head = timeline.header.get("gpu") or {}
    if head.get("status") != "ok":
        return {"status": "absent", "detail": head.get("detail")}
    s = timeline.during("gpu")
    used, why = engine_gpus(timeline)
    return {"status": "ok", "devices": [_device(d, [x["devices"][d["index"]] for x in s])
                                        for d in head.get("devices", [])],
            "engine_gpus": used, "engine_gpus_rule": why or ENGINE_GPUS_RULE}


ENGINE_GPUS_RULE = ("the engine's GPUs: those holding > 10 % of their memory, else those that computed while "
                    "requests were in flight; a GPU whose memory and utilization NVML does not read is counted beside "
                    "them, and all are counted when there are no samples")
MEMORY_HELD = 0.10  # vLLM reserves most of a GPU's memory at start; an idle GPU holds well under 1 %


def engine_gpus(timeline: Timeline) -> tuple[list[int], str | None]:
    """The indices of the GPUs the engine ran on (``ENGINE_GPUS_RULE``), and why there are none.

    NVML sees every GPU of the machine, not the engine's: a CPU engine, a mock or a remote
    server beside an idle GPU must not be diagnosed by that GPU's idleness nor charged its
    power. An idle GPU holds no memory and reads 0 % utilization throughout; any engine
    computing on one shows either. Memory first: vLLM holds most of its GPUs, so a GPU that
    only computed beside one that holds memory is another tenant's (a small llama.cpp engine
    beside such a tenant is the case this order gets wrong). A GPU whose memory and utilization
    NVML does not read is counted: nothing tells it is not the engine's. Samples while requests
    were in flight, else the whole run's, else (a run shorter than a tick) every GPU sample of
    the timeline, those before and after it."""
    devices = (timeline.header.get("gpu") or {}).get("devices", [])
    busy, during = busy_at(timeline), timeline.during("gpu")
    rows = ([r["devices"] for r in during if busy(r["t_ms"])] or [r["devices"] for r in during]
            or [r["devices"] for r in timeline.of("gpu")])
    if not rows:
        return [d["index"] for d in devices], None  # no samples: NVML cannot tell, count them all

    def read(d: dict, field: str) -> list[float]:
        return values([r[d["index"]] for r in rows if len(r) > d["index"]], field)

    unread = [d["index"] for d in devices if not read(d, "mem_used_gib") and not read(d, "util")]
    held = [d["index"] for d in devices
            if d.get("memory_total_gib") and max(read(d, "mem_used_gib"), default=0.0) > MEMORY_HELD * d["memory_total_gib"]]
    computed = [d["index"] for d in devices if max(read(d, "util"), default=0.0) > 0]
    used = sorted(set(held or computed) | set(unread))
    if used:
        return used, None
    return [], (f"NVML sees {len(devices)} GPU(s); none held over {MEMORY_HELD:.0%} of its memory or computed "
                "while requests were in flight: the engine is not on them")


def busy_at(timeline: Timeline):
    """t_ms -> did the client have requests in flight then (its latest sample at or before)?"""
    client = timeline.during("client")
    times = [s["t_ms"] for s in client]

    def at(t_ms: float) -> bool:
        i = bisect.bisect_right(times, t_ms) - 1
        return i >= 0 and client[i]["in_flight"] >= 1

    return at


def _device(static: dict, rows: list[dict]) -> dict:
    pstates = Counter(values(rows, "pstate")).most_common(1)
    return {**static, "util": stats(values(rows, "util")), "mem_util": stats(values(rows, "mem_util")),
            "power_w": stats(values(rows, "power_w")), "sm_clock_mhz": stats(values(rows, "sm_clock_mhz")),
            "mem_used_gib_max": max(values(rows, "mem_used_gib"), default=None),
            "pstate": pstates[0][0] if pstates else None}


def gpu_energy(timeline: Timeline, used: list[int], a_ms: float, b_ms: float) -> tuple[float | None, str | None]:
    """Joules the GPUs ``used`` (indices: the engine's, ``engine_gpus``) drew over [a, b] (ms from
    t0), and how they were known (metrics/energy.py): each GPU's counter, else its power
    integrated; None if any GPU's samples do not cover the span."""
    samples = timeline.of("gpu")
    total, sources = 0.0, set()
    for d in (timeline.header.get("gpu") or {}).get("devices", []):
        if d["index"] not in used:
            continue
        rows = [(s["t_ms"] / 1000, s["devices"][d["index"]]) for s in samples if len(s["devices"]) > d["index"]]
        series = cumulative_j([t for t, _ in rows], [x.get("energy_j") for _, x in rows],
                              [x.get("power_w") for _, x in rows])
        joules = joules_between(series, a_ms / 1000, b_ms / 1000)
        if joules is None:
            return None, None
        total += joules
        sources.add(series[2])
    return (total, " and ".join(sorted(sources))) if sources else (None, None)
