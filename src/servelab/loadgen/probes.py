"""``--probe-request-rate``: small requests sent beside the run, outside its schedule and
its concurrency cap, to see what one new request meets while the load goes on."""

from __future__ import annotations

import asyncio
import contextlib
import time

from servelab.client.http import Pool
from servelab.loadgen.pacer import Attempt
from servelab.loadgen.payloads import serialize
from servelab.loadgen.values import BenchConfig
from servelab.records import SampleRequest


class Probes:
    """``--probe-request-rate``: one-token requests ('Hi') sent one after another, a
    sleep of 1/rate between them, on their own connection and outside the concurrency
    cap, while the run lasts (vLLM's loop: so "rate" is at most that, never more)."""

    def __init__(self, config: BenchConfig, first: SampleRequest) -> None:
        self.config, self.pool = config, Pool(config.base_url, verify_tls=config.verify_tls)
        self.done: list[tuple[SampleRequest, Attempt]] = []
        self.stop = asyncio.Event()
        self.first_id = first.request_id
        self.task = asyncio.ensure_future(self._loop())

    async def _loop(self) -> None:
        interval = 1.0 / self.config.load.probe_request_rate
        while not self.stop.is_set():
            sample = SampleRequest("Hi", 1, 1, f"{self.first_id}-probe{len(self.done)}")
            attempt = Attempt(index=len(self.done), intended_ns=time.perf_counter_ns())
            attempt.dispatched_ns = attempt.intended_ns
            attempt.response = await self.pool.send(serialize(self.config, sample, self.pool, sample.request_id),
                                                    attempt.mark_sent)
            self.done.append((sample, attempt))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.stop.wait(), interval)

    async def finish(self) -> list[tuple[SampleRequest, Attempt]]:
        """Stop after the probe in flight (as vLLM waits for it) and hand back every probe."""
        self.stop.set()
        try:
            await self.task
        finally:
            self.pool.close()
        return self.done


def start_probes(config: BenchConfig, first: SampleRequest) -> Probes | None:
    return Probes(config, first) if config.load.probe_request_rate > 0 else None
