"""A simulated run's timeline, in the shape a real run's telemetry has.

The simulator knows its state at every step; this samples it every ``interval_s`` of
virtual time, as the scraper samples a real engine's ``/metrics``, under vLLM's names,
and adds the client's view (in flight, waiting for a slot) from the records. So the
timeline file, its summary and the diagnosis read a simulated run like a measured one.
There is no GPU: its source is absent and says why.
"""

from __future__ import annotations

from bisect import bisect_right

from servelab.records import RequestRecord
from servelab.sim.model import EngineLimits
from servelab.sim.simulate import StepTrace
from servelab.telemetry.names import COUNTERS, GAUGES
from servelab.telemetry.timeline import VERSION, Timeline, client_samples

# timeline field -> the simulator's series of the same meaning
SERIES = {"running": "running", "waiting": "waiting", "kv_usage": "kv_usage", "preemptions": "preemptions",
          "prefix_queries": "prefix_queries", "prefix_hits": "prefix_hits", "prompt_tokens": "prompt_tokens",
          "generation_tokens": "generation_tokens", "iteration_tokens_sum": "steps_tokens_sum"}


def build(sim: StepTrace, records: list[RequestRecord], t0_ns: int, end_ns: int, interval_s: float,
          limits: EngineLimits) -> Timeline:
    header = {"servelab_timeline": VERSION, "t0_ns": t0_ns, "duration_s": (end_ns - t0_ns) / 1e9,
              "interval_s": interval_s, "metrics_url": None, "simulated": True,
              "engine": {"status": "ok", "names": _names(), "failed_scrapes": 0,
                         "cache_config": {"block_size": str(limits.block_size),
                                          "num_gpu_blocks": str(limits.num_blocks)}},
              "gpu": {"status": "absent", "detail": "simulated engine: no GPU", "devices": []},
              "client": {"status": "ok"}}
    step = max(1, round(interval_s * 1e9))
    ticks = range(0, end_ns - t0_ns + step, step)
    samples = [_engine(sim, t) for t in ticks] + client_samples(records, t0_ns, ticks)
    samples.sort(key=lambda s: (s["t_ms"], s["src"]))
    return Timeline(header, samples)


def _names() -> dict:
    names = {f: GAUGES[f][0] if f in GAUGES else COUNTERS[f][0] for f in SERIES if f != "iteration_tokens_sum"}
    names["iteration_tokens_sum"] = COUNTERS["iteration_tokens_sum"][0]
    names["iteration_tokens_count"] = COUNTERS["iteration_tokens_count"][0]
    return names


def _engine(sim: StepTrace, t: int) -> dict:
    """The state after the latest step that started at or before t (idle before any)."""
    i = bisect_right(sim.t_ns, t) - 1
    sample = {"t_ms": round(t / 1e6, 3), "src": "engine"}
    for field, series in SERIES.items():
        sample[field] = float(getattr(sim, series)[i]) if i >= 0 else 0.0
    sample["iteration_tokens_count"] = float(i + 1)
    return sample
