"""One benchmark run: prepare the requests, check the server, warm up, run the
schedule, and turn raw responses into ``RequestRecord``s handed to a sink.

What costs CPU per request — JSON encoding, SSE and JSON parsing, token counting —
happens before t0 or after the last response, except in a long run: there requests
are built when taken (past a budget) and responses parsed in slices while the run
goes on (loadgen/digest.py), so memory does not grow with the run.
"""

from __future__ import annotations

import asyncio
import time

from servelab.client.http import Pool
from servelab.clock import cpu_s
from servelab.loadgen.arrivals import arrival_offsets_ns, arrival_rng, trace_offsets_ns
from servelab.loadgen.control import profile, wait_ready, warm, warm_up
from servelab.loadgen.digest import Digest
from servelab.loadgen.hooks import Hooks
from servelab.loadgen.pacer import Attempt, Counters, run_schedule
from servelab.loadgen.payloads import Payloads, serialize
from servelab.loadgen.probes import start_probes
from servelab.loadgen.responses import to_record
from servelab.loadgen.values import BenchConfig, BenchRun
from servelab.loadgen.watch import Watch
from servelab.records import RecordSink, SampleRequest


async def run_bench(config: BenchConfig, samples: list[SampleRequest], tokenizer, stop: asyncio.Event,
                    counters: Counters | None = None, *, sink: RecordSink, hooks: Hooks = Hooks(),
                    offsets_ns=None, arrival_state: tuple | None = None) -> BenchRun:
    """Run ``samples`` against the server; ``stop`` ends it early, keeping results.

    ``sink.add(i, record, t0_ns)`` takes each request's record as it is made.
    ``offsets_ns``: the schedule, when a caller drew it (a worker's shard of one
    schedule), else drawn here from the seed and ``arrival_state`` (``schedule``);
    ``hooks``: called back at t0 (``started`` may return the absolute t0: the workers'
    shared instant), the glance and how soon records are made (loadgen/hooks.py).
    """
    pool = Pool(config.base_url, verify_tls=config.verify_tls)
    counters = counters or Counters()
    age = hooks.digest_age_s
    digest = Digest(lambda a: to_record(config.kind, samples[a.index], a, tokenizer, config.trace_seed),
                    lambda i, record: sink.add(i, record, counters.t0_ns),
                    max_age_ns=None if age is None else int(age * 1e9), glance=hooks.glance)
    try:
        payloads = Payloads(config, samples, pool)
        await _before(config, pool, samples)
        offsets = offsets_ns if offsets_ns is not None else schedule(config, samples, arrival_state)
        await warm(config, pool, len(samples))
        t0 = hooks.started(counters)
        cpu0, wall0 = cpu_s(), time.time()
        digesting = asyncio.ensure_future(digest.run())
        probing = start_probes(config, samples[0])
        watch = Watch(config.load, stop, counters)
        watching = asyncio.ensure_future(watch.run()) if watch.active else None
        try:
            outcome = await run_schedule(pool, payloads, offsets, config.load.max_concurrency, stop, counters,
                                         t0, on_done=_on_done(digest, watch))
        finally:  # the probes and the rules end with the run, however it ends
            digesting.cancel()
            if watching is not None:
                watching.cancel()
            probes = await probing.finish() if probing else []
        cpu = cpu_s() - cpu0  # the run's own; what is left to parse is off the clock
        await _raise_from(digesting)
        if config.profile:
            await profile(config, pool, "stop")
    finally:
        pool.close()
    digest.flush()  # a request cut in flight was not answered: not measured, not a failure
    probe_records = tuple(to_record(config.kind, s, a, tokenizer) for s, a in probes)
    return BenchRun(outcome, wall0, cpu, probe_records, watch.section() if watch.active else None, watch.reason)


async def _before(config: BenchConfig, pool: Pool, samples: list[SampleRequest]) -> None:
    """Before the clock: the ready check, the warm-ups and the profiler's start. Probes and
    warm-ups reuse the first prompt under their own ids, so a server-side log never shows
    one request id twice."""
    probe = serialize(config, samples[0], pool, f"{samples[0].request_id}-warmup")
    if config.load.ready_check_timeout_s > 0:
        await wait_ready(config, pool, probe)
    if config.load.num_warmups > 0:
        await warm_up(config, pool, probe)
    if config.profile:
        await profile(config, pool, "start")


def _on_done(digest: Digest, watch: Watch):
    """Each answered attempt: to the digest, and to the stop rules when there are any."""
    if not watch.active:
        return digest.push

    def done(attempt: Attempt) -> None:
        watch.answered(attempt)
        digest.push(attempt)

    return done


async def _raise_from(task: asyncio.Task) -> None:
    """A cancelled task's own failure (a bug while parsing), not lost with the cancel."""
    try:
        await task
    except asyncio.CancelledError:
        pass


def schedule(config: BenchConfig, samples, arrival_state: tuple | None = None):
    """The run's arrival offsets: a trace's own send times when its requests carry
    them (vLLM's self-timed replay; --no-self-timed draws instead), else drawn from the
    seed as vLLM draws them — continuing the stream where the dataset left it
    (``arrival_state``: datasets/sample.Sample's; None, a fresh stream). A ramp
    (--ramp-up-strategy) gives each request its own rate, by its index. The same for
    one worker or many."""
    load = config.load
    if load.self_timed is not False and samples and all(getattr(s, "timestamp_s", None) is not None
                                                        for s in samples):
        return trace_offsets_ns([s.timestamp_s for s in samples])
    rng = arrival_rng(config.seed, arrival_state)
    ramp = None if load.ramp_up_strategy is None else (
        load.ramp_up_strategy, load.ramp_up_start_rps, load.ramp_up_end_rps)
    return arrival_offsets_ns(len(samples), load.request_rate, load.burstiness, rng, ramp)
