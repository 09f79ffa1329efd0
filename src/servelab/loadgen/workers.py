"""``--workers N``: one run's schedule driven by N client processes on one machine.

Why processes: one asyncio loop is one core; past it, schedule lag and client CPU
(the ``client-bound`` verdict) set the pace, not the server. Each worker is a
whole shard (loadgen/shards.py) — its own Pool, pacer and event loop, pinned to
its own core when there are enough — started with 'spawn' (no inherited locks,
threads or sockets). Each prepares its requests, says "ready" and blocks; when
all are ready the parent picks one absolute start instant a little ahead
(perf_counter_ns is CLOCK_MONOTONIC, one clock for every process of a machine)
and releases them together; each pacer counts its offsets from that instant.

Records come back in batches while the run goes on (every RECORDS_EVERY_S, each
made within that of its response's end: loadgen/digest.py), and the rest when a
worker's shard ends or is stopped (SIGTERM/SIGINT: it keeps what completed, like
one worker on Ctrl-C); the parent hands each to one sink (a ``Tally`` and, in a
bench, the records file) and keeps nothing else per request. A worker that dies
hard (SIGKILL, a crash) loses only the tail it had not sent: the parent stops the
others, keeps every record returned, and the result names the dead worker and the
requests it took with it. Every worker asks the kernel to end it if the parent
dies, and the parent joins every worker before it returns: no orphans.
"""

from __future__ import annotations

import asyncio
import ctypes
import multiprocessing as mp
import os
import resource
import signal
import threading
import time
from array import array
from collections import deque
from dataclasses import dataclass, field, replace
from multiprocessing.connection import wait

import numpy as np

from servelab.errors import InputError, ServelabError, ServerError
from servelab.loadgen.drive import BenchConfig, BenchRun, run_bench, schedule
from servelab.loadgen.pacer import Counters, RunOutcome
from servelab.loadgen.progress import Progress
from servelab.loadgen.shards import CONCURRENCY_RULE, Shard, global_index, split
from servelab.metrics.tally import Tally
from servelab.records import RequestRecord

# the start instant's lead over the release: every worker awake, and past the pacer's gc.collect, by then
START_AHEAD_NS = 100_000_000
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


@dataclass(frozen=True, slots=True)
class ShardRun:
    """How one worker's shard ended, its last message (its records went before, in batches)."""

    index: int
    pid: int
    core: int | None
    requests: int  # the shard's size
    made: int  # records made (each sent back unless the process died first)
    lag_ms: tuple[float, float]  # schedule lag p50, p99 over them
    t0_ns: int
    end_ns: int
    interrupted: bool
    not_sent: int
    cpu_s: float
    wall_start: float
    server_models: dict | None


@dataclass(slots=True)
class _Worker:
    shard: Shard
    core: int | None
    proc: mp.Process
    conn: object
    live: object  # the worker's counters, in shared memory (LIVE_FIELDS)
    ready: bool = False
    returned: int = 0  # records received so far
    run: ShardRun | None = None
    error: str | None = None  # a servelab error before the start (one line)
    exitcode: int | None = None


# What each worker publishes every PUBLISH_S, for the progress line and the telemetry's
# client samples. Aligned int64 slots: a reader never sees half a value (x86-64, arm64).
LIVE_FIELDS = ("dispatched", "done", "failed", "in_flight", "lag_ns", "cpu_ns")
PUBLISH_S = 0.05
RECORDS_EVERY_S = 0.5  # how often a worker sends its new records (and how late one may be made)


@dataclass(slots=True)
class Live:
    """The workers' counters as one client's (duck-typed like pacer.Counters): sums, except
    lag (the latest worst) and ``cpu_s``, the busiest worker's CPU (the core that binds)."""

    arrays: list
    dispatched: int = 0
    done: int = 0
    failed: int = 0
    in_flight: int = 0
    lag_ns: int = 0
    cpu_s: float = 0.0

    def refresh(self) -> None:
        rows = [list(a) for a in self.arrays]
        self.dispatched, self.done, self.failed, self.in_flight = (sum(r[i] for r in rows) for i in range(4))
        self.lag_ns = max(r[4] for r in rows)
        self.cpu_s = max(r[5] for r in rows) / 1e9


@dataclass(slots=True)
class WorkersRun:
    """The merged run and the per-worker section of the result."""

    run: BenchRun
    section: dict = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)  # one line per dead worker
    shards: list[ShardRun] = field(default_factory=list)  # what each worker returned, as returned


def run_workers(config: BenchConfig, samples, tokenizer, n: int, on_start=None, progress: bool = False,
                sink=None) -> WorkersRun:
    """Drive ``samples`` with ``n`` worker processes; ``on_start(counters)`` at the shared t0,
    inside the parent's event loop, with counters summed from the workers' (``Live``).
    ``sink.add(i, record, t0_ns)`` takes every record returned (a ``Tally`` when not given)."""
    if len(samples) < n:
        raise InputError(f"--workers {n}: only {len(samples)} requests to share between them")
    shards = split(samples, schedule(config, samples), config.load.max_concurrency, n)
    ctx = mp.get_context("spawn")
    go, t0 = ctx.Event(), ctx.Value("q", 0)
    workers = [_start(ctx, config, s, tokenizer, core, go, t0) for s, core in zip(shards, _cores(n))]
    sink = sink if sink is not None else Tally(samples)
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    stopped: list[int] = []  # the signal that stopped the run, if one did
    try:
        loop_run(_supervise(workers, go, t0, on_start, len(samples) if progress else 0, stopped,
                            lambda w, batch: _take(w, batch, sink, t0.value, n)))
    finally:
        for sig, handler in previous.items():  # the loop resets them; an engine guard may own them
            signal.signal(sig, handler)
        _reap(workers)
    merged = _merged(workers, t0.value, getattr(sink, "tally", None))
    merged.run.outcome.stopped_by = stopped[0] if stopped else None
    return merged


def _take(w: _Worker, batch: list, sink, t0_ns: int, n: int) -> None:
    """A batch of ``(local index, record)`` from worker ``w``, into the one sink."""
    for local, record in batch:
        sink.add(global_index(w.shard.index, local, n), record, t0_ns)
    w.returned += len(batch)


async def _supervise(workers: list[_Worker], go, t0, on_start, progress_total: int, stopped: list[int],
                     take) -> None:
    """Wait for every worker to be ready, release them at one instant, wait for them to end.
    Ctrl-C or SIGTERM here stops every worker; they return what they completed."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, _stop, workers, stopped, sig)
    await _until(workers, lambda w: w.ready or w.exitcode is not None, take)
    if not all(w.ready for w in workers):
        _release(go, t0, -1)  # abort: nobody starts
        await _until(workers, lambda w: w.exitcode is not None, take)
        raise ServerError(_first_error(workers))
    _release(go, t0, time.perf_counter_ns() + START_AHEAD_NS)
    live = Live([w.live for w in workers])
    await asyncio.sleep(max(0.0, (t0.value - time.perf_counter_ns()) / 1e9))
    bar = Progress(progress_total, live) if progress_total else None
    if bar:
        bar.start()
    if on_start is not None:
        on_start(live)
    try:
        await _until(workers, lambda w: w.exitcode is not None, take, live.refresh)
    finally:
        if bar:
            bar.stop()


def _cores(n: int) -> list[int | None]:
    """One core per worker, from the cores this process may use; none pinned if too few."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    return cores[:n] if len(cores) >= n else [None] * n


def shard_config(config: BenchConfig, shard: Shard) -> BenchConfig:
    """The run's config as one shard runs it: its share of the cap; the ready check and
    warm-ups are the first shard's, once."""
    load = replace(config.load, max_concurrency=shard.max_concurrency, workers=1)
    if shard.index > 0:
        load = replace(load, num_warmups=0, ready_check_timeout_s=0)
    return replace(config, load=load)


def _start(ctx, config: BenchConfig, shard: Shard, tokenizer, core, go, t0) -> _Worker:
    parent_end, child_end = ctx.Pipe(duplex=False)
    live = ctx.Array("q", len(LIVE_FIELDS), lock=False)
    proc = ctx.Process(target=_worker_main, name=f"servelab-worker-{shard.index}", daemon=True,
                       args=(shard_config(config, shard), shard, tokenizer, core, child_end, go, t0, live,
                             os.getpid()))
    proc.start()
    child_end.close()
    return _Worker(shard, core, proc, parent_end, live)


def _release(go, t0, value: int) -> None:
    t0.value = value
    go.set()


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
                if w.run is None and w.error is None and w.ready:
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
    elif kind == "ready":
        w.ready = True
    elif kind == "done":
        w.run = value
    else:
        w.error = value


def _stop(workers: list[_Worker], stopped: list[int] | None = None, sig: int | None = None) -> None:
    if stopped is not None and sig is not None:
        stopped.append(sig)
    for w in workers:
        if w.exitcode is None and w.proc.is_alive():
            os.kill(w.proc.pid, signal.SIGTERM)


def _reap(workers: list[_Worker]) -> None:
    """No worker outlives the run: ask, then insist."""
    for w in workers:
        w.proc.join(timeout=10)
        if w.proc.is_alive():
            w.proc.kill()
            w.proc.join()
        w.conn.close()


def _first_error(workers: list[_Worker]) -> str:
    for w in workers:
        if w.error:
            return f"worker {w.shard.index}: {w.error}"
    w = next(w for w in workers if not w.ready)
    return f"worker {w.shard.index} (pid {w.proc.pid}) exited with code {w.exitcode} before the start"


def _merged(workers: list[_Worker], t0_ns: int, tally: Tally | None) -> WorkersRun:
    runs = [w.run for w in workers if w.run is not None]
    failed = [w for w in workers if w.run is None]
    end = max((r.end_ns for r in runs), default=t0_ns)
    outcome = RunOutcome(t0_ns, end, bool(failed) or any(r.interrupted for r in runs),
                         sum(r.not_sent for r in runs))
    # the busiest worker's CPU: each has its own core, and the busiest is the one that binds
    cpu = max((r.cpu_s for r in runs), default=0.0)
    wall = min((r.wall_start for r in runs), default=time.time())
    models = next((r.server_models for r in runs if r.server_models), None)
    run = BenchRun(tally, outcome, wall, cpu, models)
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


class _Aborted(Exception):
    """The parent called the run off before the start (another worker failed)."""


def _worker_main(config: BenchConfig, shard: Shard, tokenizer, core, conn, go, t0, live, parent: int) -> None:
    _die_with(parent)
    if core is not None:
        os.sched_setaffinity(0, {core})
    counters, stopped, outbox = Counters(), threading.Event(), Outbox()
    publisher = threading.Thread(target=_publish, args=(counters, live, stopped, outbox, conn), daemon=True)

    def start() -> int:
        conn.send(("ready", None))
        go.wait()
        if t0.value < 0:
            raise _Aborted
        publisher.start()
        return t0.value

    error = None
    try:
        run = loop_run(_shard(config, shard, tokenizer, start, counters, outbox))
    except _Aborted:
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
    conn.send(("done", shard_run(shard, core, run, outbox)))


class Outbox:
    """A shard's records on their way out, as ``(local index, record)``: the run adds, a
    sender (the publishing thread, or Ray's driver) takes them in batches. A deque: one
    producer and one consumer need no lock."""

    tally = None  # the records leave; nothing is tallied here

    def __init__(self) -> None:
        self._queue: deque = deque()
        self.lags = array("q")  # every record's schedule lag (8 B each), for the worker's section

    def add(self, i: int, record: RequestRecord, t0_ns: int = 0) -> None:
        self._queue.append((i, record))
        self.lags.append(record.lag_ns)

    def take(self) -> list:
        batch = []
        while self._queue:
            batch.append(self._queue.popleft())
        return batch

    def lag_ms(self) -> tuple[float, float]:
        if not self.lags:
            return 0.0, 0.0
        p50, p99 = np.percentile(np.frombuffer(self.lags, np.int64) / 1e6, (50, 99))
        return float(p50), float(p99)


def shard_run(shard: Shard, core: int | None, run: BenchRun, outbox: Outbox) -> ShardRun:
    """The little the parent needs of a shard's outcome (its records went through ``outbox``)."""
    return ShardRun(shard.index, os.getpid(), core, len(shard.samples), len(outbox.lags), outbox.lag_ms(),
                    run.outcome.t0_ns, run.outcome.end_ns, run.outcome.interrupted, run.outcome.not_sent,
                    run.client_cpu_s, run.wall_start, run.server_models)


def _publish(counters: Counters, live, stopped: threading.Event, outbox: Outbox, conn) -> None:
    """Copy this worker's counters into shared memory every PUBLISH_S, and send its new
    records every RECORDS_EVERY_S (a thread: the event loop's hot path does not pay for
    it, bar the GIL while a batch is pickled)."""
    last_sent = time.monotonic()
    while True:
        last = stopped.wait(PUBLISH_S)
        c, ru = counters, resource.getrusage(resource.RUSAGE_SELF)
        live[:] = [c.dispatched, c.done, c.failed, c.in_flight, c.lag_ns, int((ru.ru_utime + ru.ru_stime) * 1e9)]
        if last:
            return
        if time.monotonic() - last_sent >= RECORDS_EVERY_S:
            last_sent = time.monotonic()
            batch = outbox.take()
            if batch:
                conn.send(("records", batch))


async def _shard(config: BenchConfig, shard: Shard, tokenizer, start, counters: Counters, outbox: Outbox) -> BenchRun:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):  # stop, keep what completed, send it back
        loop.add_signal_handler(sig, stop.set)
    return await run_bench(config, list(shard.samples), tokenizer, stop, counters, on_start=start,
                           offsets_ns=shard.offsets_ns, sink=outbox, digest_age_s=RECORDS_EVERY_S)


def _die_with(parent: int) -> None:
    """Ask the kernel for SIGTERM when the parent dies (Linux), so no worker is orphaned."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def loop_run(coro):
    try:
        import uvloop

        return uvloop.run(coro)
    except ImportError:
        return asyncio.run(coro)
