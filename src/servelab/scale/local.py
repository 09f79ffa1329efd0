"""The local fleet: replicas started on this machine, and several bench runs, one per
replica, released at one start instant.

Why processes: ``execute`` owns its event loop and its signal handlers, which only
the main thread of a process may own, and one loop is one core. So each replica's
run is a whole ``execute`` (dataset, tokenizer, telemetry of its own engine, result
files, diagnosis) in a spawned process, its console block going to its folder's
``console.txt``. Each one prepares everything, then waits in its ``on_start`` hook at
the start line (loadgen/barrier.py); when all are waiting, the parent picks t0 = now
+ PROCESS_START_LEAD_NS and releases them. ``perf_counter_ns`` is CLOCK_MONOTONIC, one
clock for every process of a machine, so the records of every replica are on one time
axis — what the common window needs.

Each process sends back its raw records (absolute times) and result in one message;
none outlives the parent (PR_SET_PDEATHSIG, then join, then kill). ``LocalFleet`` has
the shape of scale/ray.RayFleet, so scale/run.py drives either the same way.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path

from servelab.config import BenchSpec
from servelab.engines import start_engine
from servelab.engines.engine import ENGINE_LOG
from servelab.errors import EngineError, InputError, ServelabError, ServerError
from servelab.loadgen.barrier import PROCESS_START_LEAD_NS, Aborted, Barrier, reap, spawn, terminate
from servelab.measure.facts import engine_context
from servelab.records import RequestRecord
from servelab.results import layout
from servelab.scale.plan import ScalePlan, replica_name, share_text, start_failure
from servelab.telemetry import machine

REAP_GRACE_S = 30.0  # a stopped run writes its result files before it exits


@dataclass(frozen=True, slots=True)
class Job:
    """One replica's run: its spec (server and result folder set), and the result's context."""

    replica: int
    spec: BenchSpec
    context: dict
    folder: Path


@dataclass(frozen=True, slots=True)
class JobRun:
    replica: int
    records: list[RequestRecord]
    result: dict
    exit_code: int
    t0_ns: int


@dataclass(slots=True)
class LocalFleet:
    """The replicas on this machine, with scale/ray.RayFleet's face: their engines, each
    one's context for the result, ``run(jobs)`` released at one instant, ``placement()``."""

    engines: list = field(default_factory=list)
    contexts: list[dict] = field(default_factory=list)

    def run(self, jobs: list[Job]) -> list[JobRun]:
        return run_together(jobs)

    def placement(self) -> dict:
        """Nothing beyond each engine's context: every replica ran here (RayFleet says where)."""
        return {}


def start_local(plan: ScalePlan, stack: contextlib.ExitStack, say) -> LocalFleet:
    """Start each replica in turn; each is stopped when ``stack`` closes, however it closes."""
    fleet = LocalFleet()
    for i, spec in enumerate(plan.replicas):
        folder = layout.engine_dir(plan.results, plan.name, replica_name(i))
        say(f"replica {i}: starting {spec.name} ({spec.kind}) on port {spec.port}{share_text(spec)}")
        try:
            engine = start_engine(spec, folder, progress=plan.progress)
        except (EngineError, InputError) as exc:
            raise EngineError(start_failure(i, spec, exc, folder / ENGINE_LOG, len(fleet.engines))) from None
        stack.callback(engine.stop)
        fleet.engines.append(engine)
    fleet.contexts.extend(engine_context(e) for e in fleet.engines)
    return fleet


def run_together(jobs: list[Job], start_at=None) -> list[JobRun]:
    """Run every job at once from one start instant; ServerError if one fails before it.
    ``start_at()``, called once all are prepared, gives that instant (default: now +
    PROCESS_START_LEAD_NS); ``scale --ray`` waits there for the driver's, in this node's clock."""
    machine.mark_root()  # the replicas' engines are this process's: each run counts them as servelab's
    barrier = Barrier.for_processes(len(jobs))
    children = [spawn(f"servelab-replica-{job.replica}", _child, job, barrier, k) for k, job in enumerate(jobs)]
    try:
        _release_when_ready(children, barrier, start_at or (lambda: time.perf_counter_ns() + PROCESS_START_LEAD_NS))
        return _collect(children)
    except BaseException:  # Ctrl-C, SIGTERM, an error: stop them; they return what they completed
        barrier.abort()
        terminate([proc for proc, _ in children])
        raise
    finally:
        reap(children, REAP_GRACE_S)


def _release_when_ready(children: list, barrier: Barrier, start_at) -> None:
    """Wait until every run is prepared and waiting (or one has ended: it failed)."""
    while not barrier.all_ready():
        gone = barrier.gone_before_ready([proc for proc, _ in children])
        if gone is not None:
            raise ServerError(_failure(*children[gone]))
        time.sleep(0.02)
    barrier.release(start_at())


def _collect(children: list) -> list[JobRun]:
    """Each run's message; a run that ended without one failed."""
    pending, runs = {conn: (proc, conn) for proc, conn in children}, {}
    while pending:
        for conn in wait(list(pending)):
            proc, _ = pending.pop(conn)
            try:
                kind, value = conn.recv()
            except (EOFError, OSError):
                raise ServerError(_failure(proc, conn, "during its run (its records are lost)")) from None
            if kind == "error":
                raise ServerError(f"{proc.name}: {value}")
            runs[value.replica] = value
    return [runs[k] for k in sorted(runs)]


def _failure(proc, conn, when: str = "before its run started") -> str:
    with contextlib.suppress(EOFError, OSError):
        if conn.poll():
            kind, value = conn.recv()
            if kind == "error":
                return f"{proc.name}: {value}"
    proc.join(timeout=5)
    return f"{proc.name} (pid {proc.pid}) ended with code {proc.exitcode} {when}; the other runs were stopped"


# ---- in the replica's process ----------------------------------------------------------


def _child(job: Job, barrier: Barrier, party: int, conn) -> None:
    from servelab.measure.run import execute  # heavy: in the child only

    def on_start(counters) -> int:
        return barrier.arrive(party)

    job.folder.mkdir(parents=True, exist_ok=True)
    with open(job.folder / layout.CONSOLE_FILE, "w", encoding="utf-8") as out, \
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            outcome = execute(job.spec, context=job.context, on_start=on_start)
        except Aborted:
            return
        except ServelabError as exc:
            conn.send(("error", str(exc)))
            return
    run = outcome.run
    conn.send(("done", JobRun(job.replica, outcome.tally.records(), outcome.result, outcome.exit_code,
                              run.outcome.t0_ns)))
