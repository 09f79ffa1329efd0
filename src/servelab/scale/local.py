"""Several bench runs, one per replica, released at one start instant.

Why processes: ``execute`` owns its event loop and its signal handlers, which only
the main thread of a process may own, and one loop is one core. So each replica's
run is a whole ``execute`` (dataset, tokenizer, telemetry of its own engine, result
files, diagnosis) in a 'spawn'ed process, its console block going to its folder's
``console.txt``. Each one prepares everything, then blocks in its ``on_start`` hook;
when all are waiting, the parent picks t0 = now + START_AHEAD_NS and releases them.
``perf_counter_ns`` is CLOCK_MONOTONIC, one clock for every process of a machine, so
the records of every replica are on one time axis — what the common window needs.

Each process sends back its raw records (absolute times) and result in one message;
none outlives the parent (PR_SET_PDEATHSIG, then join, then kill).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import time
from dataclasses import dataclass
from multiprocessing.connection import wait
from pathlib import Path

from servelab.config import BenchSpec
from servelab.errors import ServelabError, ServerError
from servelab.loadgen.workers import START_AHEAD_NS, _die_with
from servelab.records import RequestRecord
from servelab.results.layout import CONSOLE_FILE
from servelab.telemetry import machine



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


def run_together(jobs: list[Job], start_at=None) -> list[JobRun]:
    """Run every job at once from one start instant; ServerError if one fails before it.
    ``start_at()``, called once all are prepared, gives that instant (default: now +
    START_AHEAD_NS); ``scale --ray`` waits there for the driver's, in this node's clock."""
    machine.mark_root()  # the replicas' engines are this process's: each run counts them as servelab's
    ctx = mp.get_context("spawn")
    go, t0 = ctx.Event(), ctx.Value("q", 0)
    procs = [_start(ctx, job, go, t0) for job in jobs]
    try:
        _release_when_ready(procs, go, t0, start_at or (lambda: time.perf_counter_ns() + START_AHEAD_NS))
        return _collect(procs)
    except BaseException:  # Ctrl-C, SIGTERM, an error: stop them; they return what they completed
        _release(go, t0, -1)
        for proc, _, _ in procs:
            if proc.is_alive():
                os.kill(proc.pid, signal.SIGTERM)
        raise
    finally:
        _reap(procs)


def _start(ctx, job: Job, go, t0):
    ready = ctx.Event()
    parent_end, child_end = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, name=f"servelab-replica-{job.replica}", daemon=True,
                       args=(job, ready, go, t0, child_end, os.getpid()))
    proc.start()
    child_end.close()
    return proc, ready, parent_end


def _release_when_ready(procs, go, t0, start_at) -> None:
    """Wait until every run is prepared and waiting (or one has ended: it failed)."""
    while not all(ready.is_set() for _, ready, _ in procs):
        for proc, ready, conn in procs:
            if not ready.is_set() and not proc.is_alive():
                raise ServerError(_failure(proc, conn))
        time.sleep(0.02)
    _release(go, t0, start_at())


def _release(go, t0, value: int) -> None:
    t0.value = value
    go.set()


def _collect(procs) -> list[JobRun]:
    """Each run's message; a run that ended without one failed."""
    pending, runs = {conn: (proc, conn) for proc, _, conn in procs}, {}
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


def _reap(procs) -> None:
    for proc, _, conn in procs:
        proc.join(timeout=30)
        if proc.is_alive():
            proc.kill()
            proc.join()
        conn.close()


# ---- in the replica's process ----------------------------------------------------------


class _Aborted(Exception):
    """The parent called the runs off before the start (another one failed)."""


def _child(job: Job, ready, go, t0, conn, parent: int) -> None:
    from servelab.measure.run import execute  # heavy: in the child only

    _die_with(parent)

    def on_start(counters) -> int:
        ready.set()
        go.wait()
        if t0.value < 0:
            raise _Aborted
        return t0.value

    job.folder.mkdir(parents=True, exist_ok=True)
    with open(job.folder / CONSOLE_FILE, "w", encoding="utf-8") as out, \
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            outcome = execute(job.spec, context=job.context, on_start=on_start)
        except _Aborted:
            return
        except ServelabError as exc:
            conn.send(("error", str(exc)))
            return
    run = outcome.run
    conn.send(("done", JobRun(job.replica, run.records, outcome.result, outcome.exit_code, run.outcome.t0_ns)))
