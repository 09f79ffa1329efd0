"""Where a bench's load runs — one seam, as httpx has one between policy and I/O.

Every way of running the load takes the same ``Bench`` and the run's record sink and
returns one ``DriverRun``; ``execute`` (measure/run.py) picks one by
``BenchSpec.driver`` and knows nothing else about it:

    local          this process, one event loop (loadgen/drive.run_bench)
    workers        --workers N client processes on this machine (loadgen/workers.py)
    ray            --ray: one shard per node of a Ray cluster (loadgen/ray_shards.py)
    simulated      --simulate: the simulated engine's fast mode, no server (measure/simulated.py)
    conversations  --multi-turn: conversations replayed turn by turn (loadgen/conversations.py)

Each hands every record to the sink as it is made (or returned); none hands back a tally.
"""

from __future__ import annotations

import asyncio
import dataclasses
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from servelab.config import BenchSpec
from servelab.datasets.sample import Sample
from servelab.loadgen.conversations import Replay, run_conversations, turns
from servelab.loadgen.drive import BenchConfig, BenchRun, run_bench
from servelab.loadgen.pacer import Counters
from servelab.loadgen.progress import Progress
from servelab.loadgen.loop import loop_run
from servelab.loadgen.shards import WorkersRun, concurrency_shares
from servelab.loadgen.workers import run_workers
from servelab.measure import simulated
from servelab.records import Conversation, RecordSink, SampleRequest
from servelab.results.records_file import FLUSH_S
from servelab.telemetry.timeline import Timeline

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)  # each stops the run; what completed is kept


@dataclass(frozen=True, slots=True)
class Bench:
    """What every driver is given."""

    spec: BenchSpec
    config: BenchConfig
    work: Sample | list[Conversation]  # the requests, or a multi-turn run's conversations
    tokenizer: object
    models: dict | None  # the server's /v1/models answer, asked once per bench (measure/target.py)
    on_start: Callable | None = None  # at t0, with the live counters; may return an absolute t0
    # every TICK_S while the run goes on (the records file's flush): a reason to end it, or None
    tick: Callable[[], str | None] | None = None
    # the live panel's glance at each response in this process (loadgen/glance.py); client
    # workers and Ray shards hand their records over every 0.5 s, a multi-turn run makes each as it ends
    glance: object | None = None


@dataclass(slots=True)
class DriverRun:
    """What every driver returns: the run, and what its way of running adds to the result."""

    run: BenchRun
    labels: dict = field(default_factory=dict)  # what produced the numbers (simulated, engine)
    sections: dict = field(default_factory=dict)  # the result's servelab sections (workers)
    warnings: list[str] = field(default_factory=list)  # shards lost mid-run, one line each
    replay: Replay | None = None  # a multi-turn run's turns
    timeline: Timeline | None = None  # the simulator's own; a served run's comes from its telemetry


class Driver(Protocol):
    def __call__(self, bench: Bench, sink: RecordSink) -> DriverRun: ...


def indexed(work: Sample | list[Conversation]) -> Sequence[SampleRequest]:
    """What a run's records are indexed by: its requests, or every conversation's turns."""
    return work.requests if isinstance(work, Sample) else turns(work)


def local(bench: Bench, sink: RecordSink) -> DriverRun:
    """The run in this process."""
    sample = bench.work

    async def go(stop, counters, started):
        return await run_bench(bench.config, sample.requests, bench.tokenizer, stop, counters, sink=sink,
                               on_start=started, arrival_state=sample.arrival_state,
                               server_models=bench.models, digest_age_s=_digest_age(bench),
                               glance=bench.glance), None

    run, _ = in_loop(go, len(sample.requests), bench)
    return DriverRun(run)


def _digest_age(bench: Bench) -> float | None:
    """How soon after its response each record must be made: the records file's flush (a kill
    loses no more); None: as it comes (the live panel needs none: it takes a glance)."""
    return FLUSH_S if bench.tick is not None else None


def conversations(bench: Bench, sink: RecordSink) -> DriverRun:
    """A --multi-turn run in this process; its records are its turns."""
    def go(stop, counters, started):
        return run_conversations(bench.config, bench.work, bench.spec.multi_turn, bench.tokenizer, stop, counters,
                                 started, sink=sink, server_models=bench.models)

    run, replay = in_loop(go, len(turns(bench.work)), bench)
    return DriverRun(run, replay=replay)


def workers(bench: Bench, sink: RecordSink) -> DriverRun:
    """The run split between --workers processes, one schedule dealt round-robin."""
    spec, config, sample = bench.spec, bench.config, bench.work
    n = spec.load.workers
    print(f"servelab: {n} client workers, one schedule dealt round-robin; "
          f"max concurrency split {concurrency_shares(config.load.max_concurrency, n)}", flush=True)
    return _sharded(run_workers(config, sample.requests, bench.tokenizer, n, bench.on_start,
                                progress=spec.output.progress, sink=sink, arrival_state=sample.arrival_state),
                    bench)


def ray(bench: Bench, sink: RecordSink) -> DriverRun:
    """The run split between the nodes of a Ray cluster, one shard each."""
    from servelab.loadgen.ray_shards import run_ray  # Ray is optional: imported only here

    address, sample = bench.spec.load.ray, bench.work
    print(f"servelab: load from the Ray cluster at {address}, one shard per node", flush=True)
    return _sharded(run_ray(bench.config, sample.requests, bench.tokenizer, address, bench.on_start, sink=sink,
                            arrival_state=sample.arrival_state), bench)


def _sharded(got: WorkersRun, bench: Bench) -> DriverRun:
    """A split run: the shards asked no /v1/models of their own, the bench's answer is the run's."""
    run = dataclasses.replace(got.run, server_models=bench.models)
    return DriverRun(run, sections={"workers": got.section}, warnings=list(got.failed))


def simulate(bench: Bench, sink: RecordSink) -> DriverRun:
    """--simulate: the simulated engine runs the schedule, no server, no waiting."""
    run, timeline, labels = simulated.run(bench.spec, bench.config, bench.work, sink)
    return DriverRun(run, labels=labels, timeline=timeline)


DRIVERS: dict[str, Driver] = {"local": local, "workers": workers, "ray": ray, "simulated": simulate,
                              "conversations": conversations}


def in_loop(go, total: int, bench: Bench):
    """Run ``go(stop, counters, started)`` in this process's event loop, Ctrl-C and SIGTERM
    stopping it (what completed is kept); returns what it returns, a (BenchRun, …) pair."""
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    try:
        return loop_run(_main(go, total, bench))
    finally:  # asyncio resets them to the defaults; an engine guard may own them
        for sig, handler in previous.items():
            signal.signal(sig, handler)


async def _main(go, total: int, bench: Bench):
    loop = asyncio.get_running_loop()
    stop, stopped = asyncio.Event(), []

    def on_signal(sig: int) -> None:
        stopped.append(sig)
        stop.set()

    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig)
    counters = Counters()
    bar = Progress(total, counters) if bench.spec.output.progress else None
    ticked: list[str] = []
    ticking = asyncio.ensure_future(_tick(bench.tick, stop, ticked)) if bench.tick else None
    try:
        run, more = await go(stop, counters, _started(bench.on_start, counters, bar))
        run.outcome.stopped_by = stopped[0] if stopped else None
        run.outcome.stop_reason = run.outcome.stop_reason or (ticked[0] if ticked else None)
        return run, more
    finally:
        if ticking is not None:
            ticking.cancel()
        if bar:
            bar.stop()
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)


TICK_S = 0.1


async def _tick(tick: Callable[[], str | None], stop: asyncio.Event, ticked: list[str]) -> None:
    """``tick()`` every TICK_S; the first reason it gives ends the run (a full disk)."""
    while not stop.is_set():
        await asyncio.sleep(TICK_S)
        if (why := tick()) is not None:
            ticked.append(why)
            stop.set()
            return


def _started(on_start, counters: Counters, bar: Progress | None):
    """The run's t0 hook: the caller's (it may block for a shared start), then the progress bar."""
    def started() -> int | None:
        t0 = on_start(counters) if on_start else None
        if bar:
            bar.start()
        return t0

    return started
