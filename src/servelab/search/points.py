"""A measured load point: what one bench run at one load level gave."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Point:
    """``load`` is the knob swept (concurrency or request rate); latencies in ms."""

    load: float
    throughput: float  # output tok/s
    latency_ms: dict[str, float] = field(default_factory=dict)  # e.g. {"p99_ttft": …, "median_e2el": …}
    errors: int = 0
    completed: int = 0
    request_throughput: float = 0.0  # completed req/s
    goodput: float | None = None  # req/s meeting every per-request SLO (bench --goodput); None: not asked

    def latency(self, key: str) -> float:
        return self.latency_ms.get(key, float("nan"))


def point_from_result(load: float, result: dict) -> Point:
    """From a bench result JSON (vLLM's keys: ``p99_ttft_ms`` → ``p99_ttft``)."""
    goodput = result.get("request_goodput")
    return Point(load, float(result.get("output_throughput") or 0.0), latency_stats(result),
                 int(result.get("failed") or 0), int(result.get("completed") or 0),
                 float(result.get("request_throughput") or 0.0),
                 float(goodput) if isinstance(goodput, (int, float)) and not math.isnan(goodput) else None)


def latency_stats(result: dict) -> dict[str, float]:
    out = {}
    for key, value in result.items():
        if not key.endswith("_ms") or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        stat = key.split("_", 1)[0]
        if stat in ("mean", "median", "std") or (stat[:1] == "p" and stat[1:].replace(".", "", 1).isdigit()):
            out[key.removesuffix("_ms")] = float(value)
    return out
