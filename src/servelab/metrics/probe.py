"""``--probe-request-rate``'s numbers: how long one-token requests sent beside the load
took, so a stall the load causes to unrelated requests shows.

As vLLM: latency is send to last token (E2EL) of each successful probe; median, p99
(numpy's linear interpolation) and max in ms; no numbers at all when no probe succeeded.
"""

from __future__ import annotations

import numpy as np

from servelab.metrics.summary import NS_PER_MS
from servelab.records import RequestRecord


def probe_stats(probes: list[RequestRecord]) -> dict | None:
    latencies = [r.e2el_ns / NS_PER_MS for r in probes if r.success]
    if not latencies:
        return None
    return {"probe_completed": len(latencies), "probe_failed": len(probes) - len(latencies),
            "probe_median_e2el_ms": float(np.median(latencies)),
            "probe_p99_e2el_ms": float(np.percentile(latencies, 99)),
            "probe_max_e2el_ms": float(max(latencies))}
