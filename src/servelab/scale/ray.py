"""``servelab scale --ray [ADDRESS]``: each replica started, and loaded, on a Ray node.

Replica i goes to alive node i mod M (node affinity, not soft; round-robin when N > M,
and the result says so). On its node a ``ReplicaActor`` takes the node's share of
cores or GPUs (engines/replicas.with_share: only the node knows its cores), starts the
engine with ``start_engine`` — the same lifecycle, log and guard as a local replica —
and runs that replica's bench client there, in a process of its own (scale/local.py),
so a replica's load and engine sit together. Ray is the control plane only (connect,
place, clocks: loadgen/ray_shards.py): the driver releases every client at one instant
sent in each node's own clock and gets each run's records back in bulk, shifted onto
its clock; the common window is then counted as for local replicas.

None outlives the run: the driver stops each engine and kills its actor on every way
out; if the driver dies Ray kills the actors, and an actor's death closes the pipe of
its engine's watchdog (engines/guard.py), which kills the engine's process group.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
import time
from pathlib import Path

from servelab.engines import EngineSpec, start_engine
from servelab.engines.engine import ENGINE_LOG
from servelab.engines.replicas import with_share
from servelab.errors import EngineError, InputError, ServerError
from servelab.loadgen.barrier import RAY_START_LEAD_NS, Aborted, RayParty
from servelab.loadgen.ray_connect import connect
from servelab.loadgen.ray_shards import clock_offset, on_node, shifted
from servelab.results import layout
from servelab.measure.facts import engine_context
from servelab.scale.local import Job, JobRun, run_together
from servelab.scale.plan import machine_shares, replica_name, start_failure

READY_S = 300.0  # a client prepares its dataset and tokenizer before the barrier
STOP_S = 120.0  # an engine's stop: its grace, then SIGKILL and the port check


class ReplicaActor(RayParty):
    """One replica on one node: its engine, and its client's runs one at a time, each
    waiting at this actor's start line for the driver's release (RayParty)."""

    def __init__(self) -> None:
        super().__init__()
        self.engine = None
        # Ray hides every GPU from an actor that reserves none (CUDA_VISIBLE_DEVICES=""); this
        # one reserves none on purpose and hands the node's devices to its engine itself
        if os.environ.get("CUDA_VISIBLE_DEVICES") == "":
            del os.environ["CUDA_VISIBLE_DEVICES"]

    def start(self, i: int, spec: EngineSpec, slot: tuple[int, int], folder: Path, progress: bool,
              started: int) -> dict:
        """Start the engine with this node's share slot[0] of slot[1]; the one-line failure, if any."""

        try:
            spec = _shared(spec, slot)
            self.engine = start_engine(spec, folder, progress=progress)
        except (EngineError, InputError) as exc:
            return {"error": start_failure(i, spec, exc, Path(folder) / ENGINE_LOG, started)}
        e = self.engine
        return {"base_url": e.base_url, "model": e.model, "context": engine_context(e), "host": platform.node(),
                "pid": e.pid}

    def measure(self, job: Job) -> JobRun:
        """The replica's client run, released at the instant ``release`` gives (this node's clock)."""
        try:
            return run_together([job], start_at=self._start_at)[0]
        finally:
            self.barrier.rearm()  # a waiter learns the run ended; the next starts unprepared, unreleased

    def _start_at(self) -> int:
        try:
            return self.barrier.arrive()
        except Aborted:
            raise ServerError("called off: another replica's client failed before the start") from None

    def stop(self) -> None:
        if self.engine is not None:
            self.engine.stop()


def _shared(spec: EngineSpec, slot: tuple[int, int]) -> EngineSpec:

    cores, devices = machine_shares()
    return with_share(spec, slot[0], slot[1], cores, devices)


@dataclasses.dataclass(frozen=True, slots=True)
class Remote:
    """What a client needs of a replica started on a node."""

    base_url: str
    model: str


class RayFleet:
    """The replicas on their nodes, with scale/local.LocalFleet's face: ``run(jobs)`` as
    run_together, across nodes; ``placement()`` says where each ran."""

    def __init__(self, ray, nodes: list[str], address: str | None) -> None:
        self.ray, self.address = ray, address
        self.nodes, self.actors, self.engines, self.contexts, self.hosts = nodes, [], [], [], []
        self.clocks: dict[int, tuple[int, int]] = {}

    def run(self, jobs: list[Job]) -> list[JobRun]:
        actors = [self.actors[j.replica] for j in jobs]
        refs = [a.measure.remote(j) for a, j in zip(actors, jobs)]
        try:
            clocks, t0 = self._release(jobs, actors, refs)
            runs = [self._get(j, ref) for j, ref in zip(jobs, refs)]
        except BaseException:
            for a in actors:
                a.abort.remote()  # fire and forget: the clients not yet started stand down
            raise
        self.clocks.update({j.replica: c for j, c in zip(jobs, clocks)})
        return [_on_driver_clock(run, off, t0) for run, (off, _) in zip(runs, clocks)]

    def _release(self, jobs: list[Job], actors: list, refs: list) -> tuple[list[tuple[int, int]], int]:
        """Once every client is prepared: each node's clock offset, then one start instant
        sent in each node's clock. A client that ended before it failed: ServerError."""
        ray = self.ray
        for job, actor in zip(jobs, actors):
            if not self._get(job, actor.wait_ready.remote(READY_S)):
                raise ServerError(f"replica {job.replica}'s client was not ready in {READY_S:.0f} s")
        ended, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        for job, ref in zip(jobs, refs):
            if ref in ended:  # its error, or (never expected) a run before the start
                self._get(job, ref)
                raise ServerError(f"replica {job.replica}'s client ended before the start")
        clocks = []
        for job, actor in zip(jobs, actors):
            with self._as(job):
                clocks.append(clock_offset(ray, actor))
        t0 = time.perf_counter_ns() + RAY_START_LEAD_NS
        for job, actor, (off, _) in zip(jobs, actors, clocks):
            self._get(job, actor.release.remote(t0 + off))
        return clocks, t0

    def _get(self, job: Job, ref):
        with self._as(job):
            return self.ray.get(ref)

    @contextlib.contextmanager
    def _as(self, job: Job):
        """Ray's error around the actor's (or its death), as one line naming the replica."""
        try:
            yield
        except Exception as exc:
            raise ServerError(f"replica {job.replica}'s client on Ray node {self.node_of(job.replica)[:12]} "
                              f"failed: {why(exc)}") from None

    def node_of(self, i: int) -> str:
        return self.nodes[i % len(self.nodes)]

    def placement(self) -> dict:
        """The result's ``ray`` key: which node each replica ran on, and its clock offset and bound."""
        m = len(self.nodes)
        return {"ray": {"address": self.address or "auto", "nodes": m,
                        "placement": f"node i mod {m}, node affinity (not soft); {spread(len(self.engines), m)}",
                        "clock": "NTP-style, min round trip; offset = node − driver, measured before each release",
                        "replicas": [self._placed(i) for i in range(len(self.engines))]}}

    def _placed(self, i: int) -> dict:
        offset, bound = self.clocks.get(i, (None, None))
        return {"replica": i, "node": self.node_of(i), "host": self.hosts[i], "clock_offset_ns": offset,
                "clock_bound_ns": bound}


def spread(n: int, m: int) -> str:
    """How n replicas sit on m nodes, in words."""
    return "one replica per node" if n <= m else f"round-robin: {n} replicas on {m} nodes, up to {-(-n // m)} per node"


def why(exc: Exception) -> str:
    """The first line of what went wrong on the node (a RayTaskError's ``cause``), or of
    Ray's own error (a dead actor or node)."""
    cause = getattr(exc, "cause", None) or exc
    return (str(cause).splitlines() or [type(cause).__name__])[0][:300]


def _on_driver_clock(run: JobRun, offset: int, t0: int) -> JobRun:
    return dataclasses.replace(run, records=[shifted(r, -offset) for r in run.records], t0_ns=t0)


def start_on_ray(plan, stack: contextlib.ExitStack, say) -> RayFleet:
    """Start replica i on node i mod M, one after another (as locally); each is stopped,
    and its actor killed, when ``stack`` closes."""
    ray, nodes = connect(plan.ray, plan.spec.load.ray_connect_timeout_s)
    fleet, n = RayFleet(ray, nodes, plan.ray), len(plan.replicas)
    if n > len(nodes):
        say(f"replicas placed {spread(n, len(nodes))}")
    for i, spec in enumerate(plan.replicas):
        node = fleet.node_of(i)
        actor = on_node(ray, ReplicaActor, node, num_cpus=0).remote()
        stack.callback(_stop, ray, actor)
        say(f"replica {i}: starting {spec.name} ({spec.kind}) on port {spec.port}, Ray node {node[:12]}")
        got = _start(ray, actor, plan, i, slot(i, n, len(nodes)), len(fleet.engines))
        fleet.actors.append(actor)
        fleet.engines.append(Remote(got["base_url"], got["model"]))
        fleet.contexts.append({**got["context"], "ray_node": node, "host": got["host"]})
        fleet.hosts.append(got["host"])
    return fleet


def slot(i: int, n: int, m: int) -> tuple[int, int]:
    """Replica i's share of its node, round-robin over m nodes: (its place there, how many share it)."""
    return i // m, len(range(i % m, n, m))


def _start(ray, actor, plan, i: int, slot: tuple[int, int], started: int) -> dict:
    """Replica i's engine started by its actor (share ``slot`` of its node); EngineError, one line, if not."""
    folder = layout.engine_dir(plan.results, plan.name, replica_name(i))
    try:
        got = ray.get(actor.start.remote(i, plan.replicas[i], slot, folder, plan.progress, started))
    except Exception as exc:  # the actor itself failed (the engine's failure is "error" below)
        raise EngineError(f"replica {i} failed to start: its Ray actor: {why(exc)}; stopped the {started} "
                          "replica(s) already started") from None
    if "error" in got:
        raise EngineError(got["error"])
    return got


def _stop(ray, actor) -> None:
    """Stop the replica's engine on its node, then end the actor (whose death alone would
    also take the engine: its watchdog's pipe closes)."""
    try:
        ray.get(actor.stop.remote(), timeout=STOP_S)
    except Exception as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, EngineError):  # processes survived SIGKILL, or its port stayed taken
            raise EngineError(str(cause)) from None
        # otherwise the actor is gone or hung: its death (the kill below) takes the engine (watchdog)
    finally:
        ray.kill(actor)
