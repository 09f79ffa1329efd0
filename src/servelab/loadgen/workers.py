"""``--workers N``: one run's schedule driven by N client processes on one machine.

Why processes: one asyncio loop is one core; past it, schedule lag and client CPU
(the ``client-bound`` verdict) set the pace, not the server. Each worker is a
whole shard (loadgen/shards.py) — its own Pool, pacer and event loop, pinned to
its own core when there are enough — started with 'spawn' (no inherited locks,
threads or sockets). Each prepares its requests, says "ready" and blocks; when
all are ready the parent picks one absolute start instant a little ahead
(perf_counter_ns is CLOCK_MONOTONIC, one clock for every process of a machine)
and releases them together (loadgen/barrier.py); each pacer counts its offsets
from that instant.

Records come back in batches while the run goes on (every RECORDS_EVERY_S, each
made within that of its response's end: loadgen/digest.py), and the rest when a
worker's shard ends or is stopped (SIGTERM/SIGINT: it keeps what completed, like
one worker on Ctrl-C); the parent hands each to one sink (records.RecordSink: in a
bench, the run's tally and records file) and keeps nothing else per request. A worker that dies
hard (SIGKILL, a crash) loses only the tail it had not sent: the parent stops the
others, keeps every record returned, and the result names the dead worker and the
requests it took with it. Every worker asks the kernel to end it if the parent
dies, and the parent joins every worker before it returns: no orphans.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import wait

from servelab.errors import InputError, ServelabError, ServerError
from servelab.loadgen.barrier import PROCESS_START_LEAD_NS, SPAWN, Aborted, Barrier, reap, spawn, terminate
from servelab.loadgen.drive import schedule
from servelab.loadgen.values import BenchConfig, BenchRun
from servelab.loadgen.loop import loop_run
from servelab.loadgen.pacer import Counters, RunOutcome
from servelab.loadgen.hooks import Hooks
from servelab.loadgen.shards import (CONCURRENCY_RULE, LIVE_FIELDS, RECORDS_EVERY_S, Live, Outbox, Shard, ShardRun,
                                     WorkersRun, drive_shard, live_row, run_index, shard_config, shard_run, split)
from servelab.records import RecordSink

PUBLISH_S = 0.05  # how often a worker copies its counters into shared memory
REAP_GRACE_S = 10.0  # a stopped worker sends its last records, then exits


@dataclass(slots=True)
class _Worker:
    shard: Shard
    core: int | None
    proc: object  # its process (SPAWN.Process)
    conn: object
    live: object  # the worker's counters, in shared memory (LIVE_FIELDS)
    ready: object  # its flag in the barrier: set once it is prepared and waits for t0
    returned: int = 0  # records received so far
    run: ShardRun | None = None
    error: str | None = None  # a servelab error before the start (one line)
    exitcode: int | None = None


def run_workers(config: BenchConfig, samples, tokenizer, n: int, hooks: Hooks = Hooks(), *,
                sink: RecordSink, arrival_state: tuple | None = None, split_by=None) -> WorkersRun:
    """Drive ``samples`` with ``n`` worker processes; ``hooks.started(counters)`` at the shared
    t0, inside the parent's event loop, with counters summed from the workers' (``Live``).
    ``sink.add(i, record, t0_ns)`` takes every record returned; ``arrival_state``: drive.schedule's.
    ``split_by(n)``: the run split into n shards another way (an agentic run's sessions:
    loadgen/session_shards.py)."""
    if split_by is not None:
        shards = split_by(n)
    elif len(samples) < n:
        raise InputError(f"--workers {n}: only {len(samples)} requests to share between them")
    else:
        shards = split(samples, schedule(config, samples, arrival_state), config.load.max_concurrency, n)
    barrier = Barrier.for_processes(n)
    workers = [_start(config, s, tokenizer, core, barrier) for s, core in zip(shards, _cores(n))]
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    stopped: list[int] = []  # the signal that stopped the run, if one did
    try:
        loop_run(_supervise(workers, barrier, hooks, stopped, lambda w, batch: _take(w, batch, sink, barrier.t0_ns, n)))
    finally:
        for sig, handler in previous.items():  # the loop resets them; an engine guard may own them
            signal.signal(sig, handler)
        reap([(w.proc, w.conn) for w in workers], REAP_GRACE_S)
    return _merged(workers, barrier.t0_ns, stopped[0] if stopped else None)


def _take(w: _Worker, batch: list, sink, t0_ns: int, n: int) -> None:
    """A batch of ``(local index, record)`` from worker ``w``, into the one sink."""
    for local, record in batch:
        sink.add(run_index(w.shard, local, n), record, t0_ns)
    w.returned += len(batch)


async def _supervise(workers: list[_Worker], barrier: Barrier, hooks: Hooks, stopped: list[int], take) -> None:
    """Wait for every worker to be ready, release them at one instant, wait for them to end.
    Ctrl-C or SIGTERM here stops every worker; they return what they completed."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, _stop, workers, stopped, sig)
    await _until(workers, lambda w: w.ready.is_set() or w.exitcode is not None, take)
    if not barrier.all_ready():
        barrier.abort()  # nobody starts
        await _until(workers, lambda w: w.exitcode is not None, take)
        raise ServerError(_first_error(workers))
    barrier.release(time.perf_counter_ns() + PROCESS_START_LEAD_NS)
    live = Live(arrays=[w.live for w in workers])
    await asyncio.sleep(max(0.0, (barrier.t0_ns - time.perf_counter_ns()) / 1e9))
    hooks.started(live)
    await _until(workers, lambda w: w.exitcode is not None, take, live.refresh)


def _cores(n: int) -> list[int | None]:
    """One core per worker, from the cores this process may use; none pinned if too few."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    return cores[:n] if len(cores) >= n else [None] * n


def _start(config: BenchConfig, shard: Shard, tokenizer, core, barrier: Barrier) -> _Worker:
    live = SPAWN.Array("q", len(LIVE_FIELDS), lock=False)
    proc, conn = spawn(f"servelab-worker-{shard.index}", _worker_main, shard_config(config, shard), shard,
                       tokenizer, core, barrier, live)
    return _Worker(shard, core, proc, conn, live, barrier.ready[shard.index])


async def _until(workers: list[_Worker], done, take, tick=None) -> None:
    """Read messages and exits until ``done(worker)`` holds for every worker. A worker that
    dies mid-run stops the others (they return what they completed). Polled every 20 ms:
    the parent has no hot path, and a poll keeps its event loop free for telemetry."""
    while not all(done(w) for w in workers):
        await asyncio.sleep(0.02)
        if tick is not None:
            tick()
        live = [w for w in workers if w.exitcode is None]
        ready = wait([w.conn for w in live if not w.conn.closed] + [w.proc.sentinel for w in live], 0)
        for w in live:
            if w.conn in ready or (w.proc.sentinel in ready and not w.conn.closed):
                _read(w, take)
                while _pending(w):  # a batch of records may wait behind it
                    _read(w, take)
            if w.proc.sentinel in ready and not _pending(w):
                w.proc.join()
                w.exitcode = w.proc.exitcode
                if w.run is None and w.error is None and w.ready.is_set():
                    _stop(workers)


def _pending(w: _Worker) -> bool:
    return not w.conn.closed and w.conn.poll()


def _read(w: _Worker, take) -> None:
    try:
        kind, value = w.conn.recv()
    except (EOFError, OSError):
        w.conn.close()
        return
    if kind == "records":
        take(w, value)
    elif kind == "done":
        w.run = value
    else:
        w.error = value


def _stop(workers: list[_Worker], stopped: list[int] | None = None, sig: int | None = None) -> None:
    if stopped is not None and sig is not None:
        stopped.append(sig)
    terminate([w.proc for w in workers if w.exitcode is None])


def _first_error(workers: list[_Worker]) -> str:
    for w in workers:
        if w.error:
            return f"worker {w.shard.index}: {w.error}"
    w = next(w for w in workers if not w.ready.is_set())
    return f"worker {w.shard.index} (pid {w.proc.pid}) exited with code {w.exitcode} before the start"


def _merged(workers: list[_Worker], t0_ns: int, stopped_by: int | None) -> WorkersRun:
    runs = [w.run for w in workers if w.run is not None]
    failed = [w for w in workers if w.run is None]
    end = max((r.end_ns for r in runs), default=t0_ns)
    outcome = RunOutcome(t0_ns, end, bool(failed) or any(r.interrupted for r in runs),
                         sum(r.not_sent for r in runs))
    # the busiest worker's CPU: each has its own core, and the busiest is the one that binds
    cpu = max((r.cpu_s for r in runs), default=0.0)
    wall = min((r.wall_start for r in runs), default=time.time())
    run = BenchRun(outcome, wall, cpu, stopped_by=stopped_by)
    lines = [f"worker {w.shard.index} (pid {w.proc.pid}) died ({_how(w.exitcode)}) mid-run: "
             f"{len(w.shard.samples) - w.returned} of its {len(w.shard.samples)} requests are lost "
             f"({w.returned} returned before are kept)" for w in failed]
    return WorkersRun(run, _section(workers, t0_ns), lines, runs)


def _section(workers: list[_Worker], t0_ns: int) -> dict:
    """The result's ``servelab.workers``: how the run was split and what each worker did."""
    return {"count": len(workers), "start_perf_ns": t0_ns, "concurrency_rule": CONCURRENCY_RULE,
            "max_concurrency_shares": [w.shard.max_concurrency for w in workers],
            "records_returned": f"in batches every {RECORDS_EVERY_S} s as they complete, the rest at each "
                                "worker's end (or stop); a worker killed hard loses only what it had not sent",
            "client_cpu_s": "the busiest worker's (the one that binds)",
            "per_worker": [_worker_entry(w) for w in workers]}


def _worker_entry(w: _Worker) -> dict:
    entry = {"worker": w.shard.index, "pid": w.proc.pid, "core": w.core, "requests": len(w.shard.samples),
             "max_concurrency": w.shard.max_concurrency, "failed": None, "lost_requests": 0}
    if w.run is None:
        return {**entry, "failed": _how(w.exitcode), "records": w.returned,
                "lost_requests": len(w.shard.samples) - w.returned}
    p50, p99 = w.run.lag_ms
    return {**entry, "records": w.returned, "cpu_s": w.run.cpu_s, "interrupted": w.run.interrupted,
            "not_sent": w.run.not_sent, "schedule_lag_ms": {"p50": p50, "p99": p99}}


def _how(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        return f"killed by {signal.Signals(-exitcode).name}"
    return f"exit code {exitcode}"


# ---- in the worker process ------------------------------------------------------------


def _worker_main(config: BenchConfig, shard: Shard, tokenizer, core, barrier: Barrier, live, conn) -> None:
    if core is not None:
        os.sched_setaffinity(0, {core})
    counters, stopped, outbox = Counters(), threading.Event(), Outbox()
    publisher = threading.Thread(target=_publish, args=(counters, live, stopped, outbox, conn), daemon=True)

    def start() -> int:
        t0 = barrier.arrive(shard.index)
        publisher.start()
        return t0

    error = None
    try:
        run, sessions = loop_run(_shard(config, shard, tokenizer, start, counters, outbox))
    except Aborted:
        return
    except ServelabError as exc:
        error = str(exc)
    finally:
        stopped.set()
        if publisher.is_alive():
            publisher.join()
    # one pipe, one writer at a time: only now that the publisher has ended
    if error is not None:
        conn.send(("error", error))
        return
    conn.send(("records", outbox.take()))
    conn.send(("done", shard_run(shard, core, run, outbox, sessions)))


def _publish(counters: Counters, live, stopped: threading.Event, outbox: Outbox, conn) -> None:
    """Copy this worker's counters into shared memory every PUBLISH_S, and send its new
    records every RECORDS_EVERY_S (a thread: the event loop's hot path does not pay for
    it, bar the GIL while a batch is pickled)."""
    last_sent = time.monotonic()
    while True:
        last = stopped.wait(PUBLISH_S)
        live[:] = live_row(counters)
        if last:
            return
        if time.monotonic() - last_sent >= RECORDS_EVERY_S:
            last_sent = time.monotonic()
            batch = outbox.take()
            if batch:
                conn.send(("records", batch))


async def _shard(config: BenchConfig, shard: Shard, tokenizer, start, counters: Counters, outbox: Outbox
                 ) -> tuple[BenchRun, tuple[dict, ...]]:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):  # stop, keep what completed, send it back
        loop.add_signal_handler(sig, stop.set)
    return await drive_shard(config, shard, tokenizer, stop, counters, outbox,
                             Hooks(on_start=lambda _counters: start(), digest_age_s=RECORDS_EVERY_S))
