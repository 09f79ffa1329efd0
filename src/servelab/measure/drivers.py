"""Where a bench's load runs — one seam, as httpx has one between policy and I/O.

Every way of running the load takes the same ``Bench`` and the run's record sink and
returns one ``DriverRun``; ``execute`` (measure/run.py) picks one by ``BenchSpec.driver``
and reads what it needs to know of it from its ``DriverKind``, never from the spec:

    local          this process, one event loop (loadgen/drive.run_bench)
    workers        --workers N client processes on this machine (loadgen/workers.py)
    ray            --ray: one shard per node of a Ray cluster (loadgen/ray_shards.py)
    simulated      --simulate: the simulated engine's fast mode, no server (measure/simulated.py)
    conversations  --multi-turn: conversations replayed turn by turn (loadgen/conversations.py)
    sessions       --dataset-name weka / otel / agentic: agentic sessions replayed as DAGs of calls
                   (loadgen/sessions.py); its records are every session's calls (--agentic-locked:
                   the measured ones; the result judges the run, loadgen/agentx.py)
    simulated_sessions  the same with --simulate: the simulated engine, its client the
                   sessions' DAG (loadgen/sim_sessions.py)
    sessions_workers, sessions_ray  the same with --workers N or --ray: whole sessions dealt
                   between the shards (loadgen/session_shards.py)

Each hands every record to the sink as it is made (or returned); none hands back a tally.
This is the one module of measure/ that reads the spec's modes (simulate, multi-turn,
workers, Ray): tests/measure/test_drivers.py holds the others to it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from servelab.config import BenchSpec
from servelab.datasets import prepare_requests, sample_conversations
from servelab.datasets.agentic import Sessions
from servelab.datasets.sample import Sample
from servelab.datasets.sessions import sample_sessions
from servelab.loadgen.agentx import verdict, verdict_line
from servelab.loadgen.conversations import Replay, run_conversations, turns
from servelab.loadgen.drive import run_bench
from servelab.loadgen.hooks import Hooks
from servelab.loadgen.loop import loop_run
from servelab.loadgen.pacer import Counters
from servelab.loadgen.session_shards import merged, split_sessions
from servelab.loadgen.sessions import run_sessions
from servelab.loadgen.tool_turns import chat_line
from servelab.loadgen.shards import WorkersRun, concurrency_shares
from servelab.loadgen.values import BenchConfig, BenchRun
from servelab.loadgen.workers import run_workers
from servelab.measure import session_cache, simulated
from servelab.records import Conversation, RecordSink, SampleRequest
from servelab.telemetry import machine
from servelab.telemetry.timeline import Timeline

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)  # each stops the run; what completed is kept


@dataclass(frozen=True, slots=True)
class Bench:
    """What every driver is given."""

    spec: BenchSpec
    config: BenchConfig
    work: Sample | list[Conversation] | Sessions  # the requests, a multi-turn run's conversations, or
    # an agentic run's sessions (DriverKind.work)
    tokenizer: object
    hooks: Hooks = Hooks()  # t0, tick, glance, display: chosen once per bench (measure/run.py)


@dataclass(frozen=True, slots=True)
class DriverRun:
    """What every driver returns: the run, and what its way of running adds to the result."""

    run: BenchRun
    labels: dict = field(default_factory=dict)  # what produced the numbers (simulated, engine)
    sections: dict = field(default_factory=dict)  # the result's servelab sections (workers)
    warnings: tuple[str, ...] = ()  # shards lost mid-run, one line each
    replay: Replay | None = None  # a multi-turn run's turns
    timeline: Timeline | None = None  # the simulator's own; a served run's comes from its telemetry
    # the sections it completes once the run's telemetry is known: after(timeline, context),
    # context the engine's and the simulator's (an agentic run's measured hit rate beside its ideal)
    after: Callable[[Timeline | None, dict], dict] | None = None
    drawn: int | None = None  # the run's requests were only the first ``drawn`` (recycled lanes); None: all

    def finished(self, timeline: Timeline | None, context: dict) -> DriverRun:
        """This run with ``after``'s sections in."""
        if self.after is None:
            return self
        return dataclasses.replace(self, sections={**self.sections, **self.after(timeline, context)})


class Driver(Protocol):
    def __call__(self, bench: Bench, sink: RecordSink) -> DriverRun: ...


@dataclass(frozen=True, slots=True)
class DriverKind:
    """A driver and what the rest of a bench needs to know of it."""

    run: Driver
    # a server answers: /v1/models, telemetry, the machine's share, a display, a records file an
    # unsaved run keeps; False: the simulator's fast mode (its numbers are simulated)
    served: bool = True
    # what the run's records are indexed by: its requests, or every conversation's turns
    work: Literal["requests", "conversations", "sessions"] = "requests"
    # its responses are parsed after the run in this process (loadgen/digest.py), so the live
    # panel glances at each as it ends; the others hand the panel records as they make them
    glanced: bool = False
    # processes on this machine that make load the machine's share cannot attribute (Ray's actors)
    unattributed: str | None = None

    def prepare(self, spec: BenchSpec, tokenizer) -> Sample | list[Conversation] | Sessions:
        """The run's work from its dataset: its requests, its conversations, or its sessions."""
        if self.work == "conversations":
            return sample_conversations(spec.dataset, spec.multi_turn, tokenizer)
        if self.work == "sessions":
            return sample_sessions(spec.dataset, tokenizer, spec.load.max_sessions)
        return prepare_requests(spec.dataset, tokenizer)

    def requests(self, work: Sample | list[Conversation] | Sessions) -> Sequence[SampleRequest]:
        """What the run's records are indexed by (a session's: its calls)."""
        return turns(work) if self.work == "conversations" else work.requests


def local(bench: Bench, sink: RecordSink) -> DriverRun:
    """The run in this process."""
    sample = bench.work

    async def go(stop, counters):
        return await run_bench(bench.config, sample.requests, bench.tokenizer, stop, counters, sink=sink,
                               hooks=bench.hooks, arrival_state=sample.arrival_state), None

    run, _ = in_loop(go, bench.hooks)
    return DriverRun(run)


def conversations(bench: Bench, sink: RecordSink) -> DriverRun:
    """A --multi-turn run in this process; its records are its turns."""
    def go(stop, counters):
        return run_conversations(bench.config, bench.work, bench.spec.multi_turn, bench.tokenizer, stop, counters,
                                 sink=sink, hooks=bench.hooks)

    run, replay = in_loop(go, bench.hooks)
    return DriverRun(run, replay=replay)


def sessions(bench: Bench, sink: RecordSink) -> DriverRun:
    """Agentic sessions in this process; its records are every session's calls."""
    def go(stop, counters):
        return run_sessions(bench.config, bench.work, bench.tokenizer, stop, counters, sink=sink, hooks=bench.hooks)

    run, agentic = in_loop(go, bench.hooks)
    locked, min_s = bench.spec.dataset.agentic_locked, bench.spec.dataset.agentic_min_duration_s

    def after(timeline, context) -> dict:
        section = session_cache.complete(agentic, timeline, context)
        if "chat" in section:
            print(chat_line(section["chat"]), flush=True)
        if locked:
            judged = verdict([a.response for a in agentic.attempts.values()], agentic.warmups, run, min_s)
            section["locked"] = {**section["locked"], "verdict": judged}
            print(verdict_line(judged), flush=True)
        return {"agentic": section}

    drawn = None if agentic.drawn is None else len(agentic.work.requests)
    return DriverRun(run, after=after, drawn=drawn)


def workers(bench: Bench, sink: RecordSink) -> DriverRun:
    """The run split between --workers processes, one schedule dealt round-robin."""
    spec, config, sample = bench.spec, bench.config, bench.work
    n = spec.load.workers
    print(f"servelab: {n} client workers, one schedule dealt round-robin; "
          f"max concurrency split {concurrency_shares(config.load.max_concurrency, n)}", flush=True)
    return _sharded(run_workers(config, sample.requests, bench.tokenizer, n, bench.hooks, sink=sink,
                                arrival_state=sample.arrival_state))


def ray(bench: Bench, sink: RecordSink) -> DriverRun:
    """The run split between the nodes of a Ray cluster, one shard each."""
    from servelab.loadgen.ray_shards import run_ray  # Ray is optional: imported only here

    address, sample = bench.spec.load.ray, bench.work
    print(f"servelab: load from the Ray cluster at {address}, one shard per node", flush=True)
    return _sharded(run_ray(bench.config, sample.requests, bench.tokenizer, address, bench.hooks, sink=sink,
                            arrival_state=sample.arrival_state))


def _sharded(got: WorkersRun) -> DriverRun:
    return DriverRun(got.run, sections={"workers": got.section}, warnings=tuple(got.failed))


def sessions_workers(bench: Bench, sink: RecordSink) -> DriverRun:
    """Agentic sessions split between --workers processes, a session whole on one."""
    n, config, work = bench.spec.load.workers, bench.config, bench.work
    print(f"servelab: {n} client workers, whole sessions dealt round-robin; "
          f"max concurrency split {concurrency_shares(config.load.max_concurrency, n)}", flush=True)
    got = run_workers(config, work.requests, bench.tokenizer, n, bench.hooks, sink=sink,
                      split_by=lambda k: split_sessions(config, work, k, f"--workers {k}"))
    return _sessions_sharded(got, work)


def sessions_ray(bench: Bench, sink: RecordSink) -> DriverRun:
    """Agentic sessions split between the nodes of a Ray cluster, a session whole on one."""
    from servelab.loadgen.ray_shards import run_ray  # Ray is optional: imported only here

    address, config, work = bench.spec.load.ray, bench.config, bench.work
    print(f"servelab: load from the Ray cluster at {address}, whole sessions dealt between its nodes", flush=True)
    got = run_ray(config, work.requests, bench.tokenizer, address, bench.hooks, sink=sink,
                  split_by=lambda k: split_sessions(config, work, k, "--ray"))
    return _sessions_sharded(got, work)


def _sessions_sharded(got: WorkersRun, work: Sessions) -> DriverRun:
    agentic = merged(work, got.shards, got.section["count"])
    return dataclasses.replace(_sharded(got), after=lambda timeline, context: {
        "agentic": session_cache.complete(agentic, timeline, context)})


def simulate(bench: Bench, sink: RecordSink) -> DriverRun:
    """--simulate: the simulated engine runs the schedule, no server, no waiting."""
    limits, model = bench.spec.simulate
    run, timeline, labels = simulated.run(limits, model, bench.spec.output, bench.config, bench.work, sink)
    return DriverRun(run, labels=labels, timeline=timeline)


def simulate_sessions(bench: Bench, sink: RecordSink) -> DriverRun:
    """--simulate with agentic sessions: the simulated engine, a call sent when its parents end."""
    limits, model = bench.spec.simulate
    run, timeline, labels, agentic = simulated.run_sessions(limits, model, bench.spec.output, bench.config,
                                                           bench.work, sink)
    return DriverRun(run, labels=labels, timeline=timeline,
                     after=lambda timeline, context: {"agentic": session_cache.complete(agentic, timeline,
                                                                                        {**labels, **context})})


DRIVERS: dict[str, DriverKind] = {
    "local": DriverKind(local, glanced=True),
    "workers": DriverKind(workers),
    "ray": DriverKind(ray, unattributed=machine.RAY_ACTORS),
    "simulated": DriverKind(simulate, served=False),
    "conversations": DriverKind(conversations, work="conversations"),
    "sessions": DriverKind(sessions, work="sessions"),
    "simulated_sessions": DriverKind(simulate_sessions, served=False, work="sessions"),
    "sessions_workers": DriverKind(sessions_workers, work="sessions"),
    "sessions_ray": DriverKind(sessions_ray, work="sessions", unattributed=machine.RAY_ACTORS),
}


def in_loop(go, hooks: Hooks):
    """Run ``go(stop, counters)`` in this process's event loop, Ctrl-C and SIGTERM stopping
    it (what completed is kept), the hooks' tick able to end it; returns what it returns,
    a (BenchRun, …) pair, the run saying which signal or tick ended it."""
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    try:
        return loop_run(_main(go, hooks.tick))
    finally:  # asyncio resets them to the defaults; an engine guard may own them
        for sig, handler in previous.items():
            signal.signal(sig, handler)


async def _main(go, tick: Callable[[], str | None] | None):
    loop = asyncio.get_running_loop()
    stop, stopped = asyncio.Event(), []

    def on_signal(sig: int) -> None:
        stopped.append(sig)
        stop.set()

    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig)
    ticked: list[str] = []
    ticking = asyncio.ensure_future(_tick(tick, stop, ticked)) if tick else None
    try:
        run, more = await go(stop, Counters())
        return dataclasses.replace(run, stopped_by=stopped[0] if stopped else None,
                                   ticked=ticked[0] if ticked else None), more
    finally:
        if ticking is not None:
            ticking.cancel()
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
