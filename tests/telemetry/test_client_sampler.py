"""The in-loop sampler reads the runner's counters on a timer and derives waiting and CPU."""

from __future__ import annotations

import asyncio

from servelab.loadgen.pacer import Counters
from servelab.telemetry.client import ClientSampler

INTERVAL_S = 0.02


async def rows_taken(sampler: ClientSampler, n: int) -> None:
    """Wait until the sampler has taken ``n`` rows, however late a busy machine runs its timer."""
    while len(sampler.rows) < n:
        await asyncio.sleep(INTERVAL_S / 4)


def test_samples_follow_the_counters():
    counters = Counters()
    sampler = ClientSampler(interval_s=INTERVAL_S)

    async def main():
        sampler.start(counters)
        counters.dispatched, counters.in_flight, counters.lag_ns = 10, 4, 1_500_000
        await rows_taken(sampler, 2)
        counters.done, counters.in_flight, counters.failed = 6, 4, 1
        sum(i * i for i in range(200_000))  # burn some CPU on the loop
        await rows_taken(sampler, 4)

    asyncio.run(main())  # closing the loop cancels the sampler: it takes one last row
    rows = sampler.samples()
    assert rows[0]["in_flight"] == 0 and "cpu" not in rows[0]
    assert {"in_flight": 4, "waiting": 6, "lag_ms": 1.5} == {k: rows[1][k] for k in ("in_flight", "waiting", "lag_ms")}
    last = rows[-1]
    assert (last["done"], last["waiting"], last["failed"]) == (6, 0, 1)
    assert all(0.0 <= r["cpu"] <= 1.5 for r in rows[1:]) and max(r["cpu"] for r in rows[1:]) > 0
    times = [r["t_ns"] for r in rows]
    # One row at the start, one per tick, one at the end: ticks keep to their interval (a
    # late one is made up, never taken early), so no more rows than the time allows.
    assert times == sorted(times) and 5 <= len(rows) <= 2 + (times[-1] - times[0]) / (INTERVAL_S * 1e9)
