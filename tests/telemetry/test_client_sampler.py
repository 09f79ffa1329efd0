"""The in-loop sampler reads the runner's counters on a timer and derives waiting and CPU."""

from __future__ import annotations

import asyncio

from servelab.loadgen.pacer import Counters
from servelab.telemetry.client import ClientSampler


def test_samples_follow_the_counters():
    counters = Counters()
    sampler = ClientSampler(interval_s=0.02)

    async def main():
        sampler.start(counters)
        counters.dispatched, counters.in_flight, counters.lag_ns = 10, 4, 1_500_000
        await asyncio.sleep(0.05)
        counters.done, counters.in_flight, counters.failed = 6, 4, 1
        sum(i * i for i in range(200_000))  # burn some CPU on the loop
        await asyncio.sleep(0.05)

    asyncio.run(main())  # closing the loop cancels the sampler: it takes one last row
    rows = sampler.samples()
    assert rows[0]["in_flight"] == 0 and "cpu" not in rows[0]
    assert {"in_flight": 4, "waiting": 6, "lag_ms": 1.5} == {k: rows[1][k] for k in ("in_flight", "waiting", "lag_ms")}
    last = rows[-1]
    assert (last["done"], last["waiting"], last["failed"]) == (6, 0, 1)
    assert all(0.0 <= r["cpu"] <= 1.5 for r in rows[1:]) and max(r["cpu"] for r in rows[1:]) > 0
    times = [r["t_ns"] for r in rows]
    assert times == sorted(times) and 4 <= len(rows) <= 8
