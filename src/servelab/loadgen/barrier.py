"""One start line for a run split between processes or Ray actors.

Every party prepares (dataset, tokenizer, connections), says it is ready and waits;
when all are ready the releaser picks one start instant t0 a little ahead and
releases them together, or calls the run off (nobody starts) when one failed first.
Client workers (loadgen/workers.py), Ray shards (loadgen/ray_shards.py), the local
replica fleet (scale/local.py) and the Ray replica fleet (scale/ray.py) all start
this way, so the handshake and its guarantees live here once.

Why one t0 works: ``perf_counter_ns`` is CLOCK_MONOTONIC, one clock for every process
of a machine. Across Ray nodes each actor is sent t0 in its own clock (the driver
measures the offsets: loadgen/ray_shards.clock_offset).

Processes here are started with 'spawn' (no inherited locks, threads or sockets), each
asks the kernel to end it if its parent dies, and the parent reaps every one (join,
then kill): no orphans, however the run ends.
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import signal
import threading
import time
from dataclasses import dataclass

# How far ahead of the release t0 is set, per transport. The lead is dead time at the
# start of every run, so each is the least that still lets every party wake before t0:
# processes: every one awake, and past the pacer's gc.collect, by then
PROCESS_START_LEAD_NS = 100_000_000
# Ray: the release crosses the cluster (one Ray RPC per node) before each node's t0
RAY_START_LEAD_NS = 500_000_000
CALLED_OFF = -1  # t0 when the run is called off: no clock reads a negative instant

SPAWN = mp.get_context("spawn")
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


class Aborted(Exception):
    """The releaser called the run off before the start (another party failed)."""


class _Cell:
    """t0 between threads (processes share an ``mp.Value`` instead)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0


@dataclass(frozen=True)
class Barrier:
    """One flag per party (it is ready), one go signal and one t0 shared by all. Made for
    processes it is passed to each child when spawned; made for threads it lives in one
    process (a Ray actor)."""

    ready: tuple
    go: object
    t0: object  # .value: the start instant, perf_counter_ns; CALLED_OFF when called off

    @classmethod
    def for_processes(cls, n: int) -> Barrier:
        return cls(tuple(SPAWN.Event() for _ in range(n)), SPAWN.Event(), SPAWN.Value("q", 0))

    @classmethod
    def for_threads(cls, n: int = 1) -> Barrier:
        return cls(tuple(threading.Event() for _ in range(n)), threading.Event(), _Cell())

    @property
    def t0_ns(self) -> int:
        return self.t0.value

    # ---- a party's side

    def arrive(self, party: int = 0) -> int:
        """Say ``party`` is ready and wait for the release: t0, or Aborted if called off."""
        self.ready[party].set()
        self.go.wait()
        if self.t0.value < 0:
            raise Aborted
        return self.t0.value

    # ---- the releaser's side

    def release(self, t0_ns: int) -> None:
        self.t0.value = t0_ns
        self.go.set()

    def abort(self) -> None:
        self.release(CALLED_OFF)

    def all_ready(self) -> bool:
        return all(r.is_set() for r in self.ready)

    def wait_ready(self, timeout_s: float) -> bool:
        """Whether every party is ready within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        return all(r.wait(max(0.0, deadline - time.monotonic())) for r in self.ready)

    def gone_before_ready(self, procs: list) -> int | None:
        """The first party whose process ended before it said ready (it failed), if any."""
        return next((i for i, p in enumerate(procs) if not self.ready[i].is_set() and not p.is_alive()), None)

    def rearm(self) -> None:
        """For the next run: a releaser still waiting for readiness wakes (and finds the run
        ended), then every flag is cleared."""
        for r in self.ready:
            r.set()
            r.clear()
        self.go.clear()


class RayParty:
    """What a Ray actor shows the driver of its start line: its clock (for the offset), its
    readiness, the release in its own clock, the call-off. ShardActor and ReplicaActor
    derive from it (one level): the actor's run waits in ``self.barrier.arrive()``."""

    def __init__(self) -> None:
        self.barrier = Barrier.for_threads()

    def clock(self) -> int:
        return time.perf_counter_ns()

    def wait_ready(self, timeout_s: float) -> bool:
        return self.barrier.wait_ready(timeout_s)

    def release(self, t0_local: int) -> None:
        self.barrier.release(t0_local)

    def abort(self) -> None:
        self.barrier.abort()


# ---- child processes ----------------------------------------------------------------


def spawn(name: str, target, *args) -> tuple:
    """``target(*args, conn)`` in a new daemon process that dies with this one; ``conn`` is
    the child's end of a one-way pipe. Returns the process and the parent's end."""
    parent_end, child_end = SPAWN.Pipe(duplex=False)
    proc = SPAWN.Process(target=_child, name=name, daemon=True, args=(target, args, child_end, os.getpid()))
    proc.start()
    child_end.close()
    return proc, parent_end


def _child(target, args: tuple, conn, parent: int) -> None:
    die_with(parent)
    target(*args, conn)


def die_with(parent: int) -> None:
    """Ask the kernel for SIGTERM when the parent dies (Linux), so no child is orphaned."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def terminate(procs: list) -> None:
    """SIGTERM to each that still runs: a run stops and sends back what it completed."""
    for proc in procs:
        if proc.is_alive():
            os.kill(proc.pid, signal.SIGTERM)


def reap(children: list, grace_s: float) -> None:
    """No child outlives the run: wait ``grace_s`` for each ``(process, conn)``, then kill."""
    for proc, conn in children:
        proc.join(timeout=grace_s)
        if proc.is_alive():
            proc.kill()
            proc.join()
        conn.close()
