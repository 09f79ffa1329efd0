"""One run's schedule split between client workers, and the protocol every shard speaks
back, whether it runs in a local worker process (loadgen/workers.py) or on a Ray node
(loadgen/ray_shards.py): its records in batches (``Outbox``), its live counters as a
row (``Live`` sums them), and how it ended (``ShardRun``, merged into ``WorkersRun``).

The split is pure: the schedule is drawn once, as one worker would draw it, and dealt
round-robin — request ``j`` goes to worker ``j % n`` — so the union of the shards'
arrivals is exactly the single-worker schedule, and each shard offers ``1/n`` of the
rate with the same burstiness pattern interleaved.
"""

from __future__ import annotations

import os
from array import array
from collections import deque
from dataclasses import dataclass, field, replace

import numpy as np

from servelab.clock import cpu_s
from servelab.datasets.agentic import Sessions
from servelab.loadgen.drive import run_bench
from servelab.loadgen.hooks import Hooks
from servelab.loadgen.sessions import run_sessions
from servelab.loadgen.values import BenchConfig, BenchRun
from servelab.loadgen.pacer import COUNTER_ROW, Counters
from servelab.records import RequestRecord, SampleRequest

# --max-concurrency stays a cap on the whole run by splitting it: worker i gets
# floor(C/n) slots, plus one for the first C mod n workers (the shares sum to C).
# A shared cross-process semaphore would keep the slots pooled, but it puts a lock
# (a syscall when contended) on every request's hot path and couples the workers'
# event loops (a blocking acquire stalls a loop; an async one must poll). The cost
# of the split: while one worker's requests run long, its idle neighbour cannot lend
# it a slot, so the run is at most C in flight, sometimes below it.
CONCURRENCY_RULE = "split: worker i gets floor(C/n), +1 for i < C mod n (sum = C); no slot lending"

# What each shard publishes, for the progress line and the telemetry's client samples:
# its Counters' row and its process's CPU. Aligned int64 slots in a worker's shared
# memory: a reader never sees half a value (x86-64, arm64).
LIVE_FIELDS = (*COUNTER_ROW, "cpu_ns")
RECORDS_EVERY_S = 0.5  # how often a shard sends its new records (and how late one may be made)


@dataclass(frozen=True, slots=True)
class Shard:
    """What one worker sends: its requests, their offsets from the shared t0, its cap."""

    index: int
    samples: tuple[SampleRequest, ...]
    offsets_ns: np.ndarray  # its requests' arrivals; an agentic shard's: its sessions' starts
    max_concurrency: int | None
    # an agentic run's shard: whole sessions (loadgen/session_shards.py), its samples their calls,
    # ``indices`` each call's place in the run; None: requests dealt round-robin
    sessions: Sessions | None = None
    indices: tuple[int, ...] | None = None


def concurrency_shares(cap: int | None, n: int) -> list[int | None]:
    """Each worker's slots: ``cap`` split floor/ceil, summing to ``cap`` (None: no cap)."""
    if cap is None:
        return [None] * n
    return [cap // n + (1 if i < cap % n else 0) for i in range(n)]


def split(samples: list[SampleRequest], offsets_ns: np.ndarray, cap: int | None, n: int) -> list[Shard]:
    """Deal the one schedule round-robin into ``n`` shards."""
    offsets = np.asarray(offsets_ns, dtype=np.int64)
    caps = concurrency_shares(cap, n)
    return [Shard(i, tuple(samples[i::n]), offsets[i::n], caps[i]) for i in range(n)]


def global_index(shard: int, local: int, n: int) -> int:
    """Where a shard's ``local``-th request stands in the run (the inverse of ``split``'s deal)."""
    return local * n + shard


def run_index(shard: Shard, local: int, n: int) -> int:
    """Where a shard's ``local``-th record stands in the run: an agentic shard's by its table."""
    return shard.indices[local] if shard.indices is not None else global_index(shard.index, local, n)


async def drive_shard(config: BenchConfig, shard: Shard, tokenizer, stop, counters: Counters, outbox: Outbox,
                      hooks: Hooks) -> tuple[BenchRun, tuple[dict, ...]]:
    """Run one shard where it was sent (a worker process, a Ray node): its requests on their
    offsets, or its sessions from their starts; the run, and an agentic shard's sessions'
    figures (loadgen/sessions.Agentic.per_session; () for requests)."""
    if shard.sessions is None:
        run = await run_bench(config, list(shard.samples), tokenizer, stop, counters, sink=outbox, hooks=hooks,
                              offsets_ns=shard.offsets_ns)
        return run, ()
    run, agentic = await run_sessions(config, shard.sessions, tokenizer, stop, counters, sink=outbox, hooks=hooks,
                                      offsets_ns=shard.offsets_ns)
    return run, tuple(agentic.per_session())


def shard_config(config: BenchConfig, shard: Shard) -> BenchConfig:
    """The run's config as one shard runs it: its share of the cap; the ready check and
    warm-ups are the first shard's, once."""
    load = replace(config.load, max_concurrency=shard.max_concurrency, workers=1)
    if shard.index > 0:
        load = replace(load, num_warmups=0, ready_check_timeout_s=0)
    return replace(config, load=load)


# ---- what a shard sends back ----------------------------------------------------------


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
    sessions: tuple[dict, ...] = ()  # an agentic shard's sessions, as Agentic.per_session gives them


class Outbox:
    """A shard's records on their way out, as ``(local index, record)``: the run adds, a
    sender (the publishing thread, or Ray's driver) takes them in batches. A deque: one
    producer and one consumer need no lock."""

    def __init__(self) -> None:
        self._queue: deque = deque()
        self.lags = array("q")  # every record's schedule lag (8 B each), for the worker's section

    def add(self, i: int, record: RequestRecord, t0_ns: int) -> None:
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


def shard_run(shard: Shard, core: int | None, run: BenchRun, outbox: Outbox, sessions: tuple[dict, ...] = ()
              ) -> ShardRun:
    """The little the parent needs of a shard's outcome (its records went through ``outbox``)."""
    return ShardRun(shard.index, os.getpid(), core, len(shard.samples), len(outbox.lags), outbox.lag_ms(),
                    run.outcome.t0_ns, run.outcome.end_ns, run.outcome.interrupted, run.outcome.not_sent,
                    run.client_cpu_s, run.wall_start, sessions)


def live_row(counters: Counters) -> list[int]:
    """One shard's counters and its process's CPU so far, in LIVE_FIELDS' order."""
    return [*counters.as_row(), int(cpu_s() * 1e9)]


@dataclass(slots=True)
class Live(Counters):
    """The shards' counters as one client's: sums, except lag (the latest worst) and
    ``cpu_s``, the busiest shard's CPU (the core that binds). ``arrays``: each shard's
    latest row (LIVE_FIELDS), which ``refresh`` reads."""

    arrays: list = field(default_factory=list)
    cpu_s: float = 0.0

    def refresh(self) -> None:
        rows = [list(a) for a in self.arrays]
        for k, name in enumerate(COUNTER_ROW):
            column = [r[k] for r in rows]
            setattr(self, name, max(column) if name == "lag_ns" else sum(column))
        self.cpu_s = max(r[-1] for r in rows) / 1e9

    def client_cpu_s(self) -> float:
        return self.cpu_s  # the busiest shard's, as of the last refresh


@dataclass(slots=True)
class WorkersRun:
    """The merged run and the per-worker section of the result."""

    run: BenchRun
    section: dict = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)  # one line per dead worker
    shards: list[ShardRun] = field(default_factory=list)  # what each worker returned, as returned
