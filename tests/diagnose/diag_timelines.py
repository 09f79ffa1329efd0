"""Hand-built timelines for the rule tests: ``n`` ticks 250 ms apart, during the run."""

from __future__ import annotations

from servelab.diagnose.decide import diagnose
from servelab.diagnose.evidence import RunFacts, evidence
from servelab.telemetry.timeline import Timeline

TICK_MS = 250.0

H200 = {"index": 0, "name": "NVIDIA H200", "memory_total_gib": 139.8, "power_limit_w": 700.0,
        "sm_clock_max_mhz": 1980}


def make_timeline(n: int = 40, engine=None, client=None, gpu=None, engine_absent: str | None = None,
                  gpu_devices=None, names=None) -> Timeline:
    """``engine(i)``/``client(i)`` -> dict of fields (or None: no sample that tick);
    ``gpu(i)`` -> list of per-device dicts. Absent callables: that source has no samples."""
    header = {"servelab_timeline": 1, "t0_ns": 0, "duration_s": n * TICK_MS / 1000.0, "interval_s": 0.25,
              "engine": ({"status": "absent", "detail": engine_absent} if engine_absent else
                         {"status": "ok", "names": names or {}, "cache_config": {}}),
              "gpu": ({"status": "ok", "devices": gpu_devices} if gpu_devices else
                      {"status": "absent", "detail": "NVML unavailable (test)", "devices": []}),
              "client": {"status": "ok"}}
    samples = []
    for i in range(n):
        t = i * TICK_MS + 1.0
        for src, fn in (("engine", engine), ("client", client)):
            row = fn(i) if fn else None
            if row is not None:
                samples.append({"t_ms": t, "src": src, **row})
        if gpu:
            samples.append({"t_ms": t + 1.0, "src": "gpu", "devices": gpu(i)})
    return Timeline(header, samples)


def client_at(in_flight: int, waiting: int = 0, cpu: float = 0.05, lag_ms: float = 0.1):
    return lambda i: {"in_flight": in_flight, "waiting": waiting, "cpu": cpu, "lag_ms": lag_ms}


def engine_at(running: float, waiting: float, kv: float | None = 0.05, preemptions=None, **extra):
    """Constant gauges; ``preemptions`` is a function of the tick (a counter), or None (not reported)."""
    def row(i: int) -> dict:
        out = {"running": running, "waiting": waiting, **extra}
        if kv is not None:
            out["kv_usage"] = kv
        if preemptions is not None:
            out["preemptions"] = preemptions(i)
        return out
    return row


def verdict_ids(timeline: Timeline | None, **facts) -> list[str]:
    return [v.id for v in run(timeline, **facts).verdicts]


def run(timeline: Timeline | None, **facts):
    return diagnose(evidence(RunFacts(**facts), timeline))
