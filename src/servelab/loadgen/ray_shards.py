"""``--ray [ADDRESS]``: one run's schedule driven from every node of a Ray cluster.

Ray is the control plane only: it places one actor per alive node (node affinity,
not soft), carries the shard there and the records back in batches: the driver
takes each actor's new records every POLL_S while the run goes on (and the rest
when its shard ends), so a node lost mid-run loses only what it had not handed over. Each actor runs a
whole shard (loadgen/shards.py) with the same ``run_bench`` as a local worker, in a
thread of its own with its own event loop, so the actor can still answer ``clock``
and ``release`` while the shard waits to start.

Clocks: ``perf_counter_ns`` is per machine. Before the start the driver measures
each node's offset with an NTP-style exchange — send at ``a``, the node reads its
clock ``r``, reply at ``b``: offset = r − (a + b)/2, error at most (b − a)/2 — and
keeps the sample with the smallest round trip. The start instant is sent in each
node's own clock (t0 + offset); records come back shifted onto the driver's clock.
Offsets and bounds go into the result. Needs ``servelab[ray]`` (ray).
"""

from __future__ import annotations

import dataclasses
import time

from servelab.errors import InputError, ServerError
from servelab.loadgen.barrier import RAY_START_LEAD_NS, RayParty
from servelab.loadgen.drive import schedule
from servelab.loadgen.hooks import Hooks
from servelab.loadgen.values import BenchConfig, BenchRun
from servelab.loadgen.loop import loop_run
from servelab.loadgen.pacer import Counters, RunOutcome
from servelab.loadgen.ray_connect import connect, first_line
from servelab.loadgen.shards import (CONCURRENCY_RULE, LIVE_FIELDS, RECORDS_EVERY_S, Live, Outbox, Shard, ShardRun,
                                     WorkersRun, drive_shard, live_row, run_index, shard_config, shard_run, split)
from servelab.records import RecordSink, RequestRecord

CLOCK_SAMPLES = 16
POLL_S = 0.25  # the nodes' counters, for the progress line and telemetry's client samples


class ShardActor(RayParty):
    """One node's shard. ``run`` blocks (in Ray's thread pool) until the shard ends;
    meanwhile the driver calls ``clock``, ``wait_ready`` and ``release`` (RayParty)."""

    def __init__(self, config: BenchConfig, shard: Shard, tokenizer) -> None:
        super().__init__()
        self.config, self.shard, self.tokenizer = config, shard, tokenizer
        self.stopper = None  # (loop, asyncio.Event) once the shard's loop runs
        self.live = Counters()
        self.outbox = Outbox()

    def take_records(self) -> list:
        """The records made since the last call, as ``(local index, record)`` on this node's clock."""
        return self.outbox.take()

    def counters(self) -> list[int]:
        """This shard's live counters and CPU, as a local worker publishes them (LIVE_FIELDS)."""
        return live_row(self.live)

    def stop(self) -> None:
        """End the shard now (another node failed), keeping what completed."""
        if self.stopper is not None:
            loop, event = self.stopper
            loop.call_soon_threadsafe(event.set)
        self.release(time.perf_counter_ns())

    def run(self) -> ShardRun:
        import asyncio

        async def main() -> tuple[BenchRun, tuple[dict, ...]]:
            self.stopper = (asyncio.get_running_loop(), asyncio.Event())
            hooks = Hooks(on_start=lambda _counters: self.barrier.arrive(), digest_age_s=RECORDS_EVERY_S)
            return await drive_shard(self.config, self.shard, self.tokenizer, self.stopper[1], self.live, self.outbox,
                                     hooks)

        run, sessions = loop_run(main())
        return shard_run(self.shard, None, run, self.outbox, sessions)


FINAL_TAKE_S = 120.0  # an ended shard's last batch: the whole tail of a big shard may be in it


READY_S = 300.0  # an actor placed, its shard's requests tokenized, waiting at the start line


def run_ray(config: BenchConfig, samples, tokenizer, address: str | None, hooks: Hooks = Hooks(), *, sink: RecordSink,
            arrival_state: tuple | None = None, split_by=None) -> WorkersRun:
    """Drive ``samples`` with one shard per alive node of the Ray cluster at ``address``;
    ``sink.add(i, record, t0_ns)`` takes every record returned; ``arrival_state``: drive.schedule's.
    ``split_by(n)``: the run split into n shards another way (an agentic run's sessions:
    loadgen/session_shards.py), n known once the cluster answers. No actor outlives the call."""
    ray, nodes = connect(address, config.load.ray_connect_timeout_s)
    if split_by is not None:
        shards = split_by(len(nodes))
    elif len(samples) < len(nodes):
        raise InputError(f"--ray: only {len(samples)} requests for {len(nodes)} nodes")
    else:
        shards = split(samples, schedule(config, samples, arrival_state), config.load.max_concurrency, len(nodes))
    actors = [_place(ray, node, config, shard, tokenizer) for node, shard in zip(nodes, shards)]
    try:
        return _drive(ray, nodes, shards, actors, hooks, sink)
    finally:
        for actor in actors:
            ray.kill(actor)  # a shard still running (a node cut off, a hung loop) ends here, not later


def _drive(ray, nodes: list[str], shards: list[Shard], actors: list, hooks: Hooks, sink: RecordSink) -> WorkersRun:
    runs = [a.run.remote() for a in actors]
    _wait_ready(ray, nodes, shards, actors)
    clocks = [clock_offset(ray, a) for a in actors]
    t0 = time.perf_counter_ns() + RAY_START_LEAD_NS
    ray.get([a.release.remote(t0 + off) for a, (off, _) in zip(actors, clocks)])
    returned = [0] * len(actors)

    def take(k: int, timeout_s: float = 10.0) -> None:
        """Shard ``k``'s new records, onto the driver's clock, into the one sink."""
        try:
            batch = ray.get(actors[k].take_records.remote(), timeout=timeout_s)
        except Exception:  # a dead actor: what it had not handed over is lost
            return
        off = clocks[k][0]
        for local, record in batch:
            sink.add(run_index(shards[k], local, len(actors)), shifted(record, -off), t0)
        returned[k] += len(batch)

    got = loop_run(_supervise(ray, runs, actors, t0, hooks, take))
    return _merged(shards, nodes, clocks, got, t0, returned)


def _wait_ready(ray, nodes: list[str], shards: list[Shard], actors: list) -> None:
    """Every shard at its start line within READY_S, or ServerError naming the first node that is not
    (an actor Ray cannot place, a node gone, a shard whose preparation failed); nothing was sent yet."""
    refs = [a.wait_ready.remote(READY_S) for a in actors]
    done, _ = ray.wait(refs, num_returns=len(refs), timeout=READY_S + 5.0)
    for node, shard, ref in zip(nodes, shards, refs):
        why = f"not ready in {READY_S:g} s"
        try:
            ready = ref in done and ray.get(ref, timeout=1.0)
        except Exception as exc:  # its actor died or could not start: Ray's words
            ready, why = False, first_line(exc)
        if not ready:
            raise ServerError(f"--ray: the shard actor on Ray node {node[:12]} (shard {shard.index}, "
                              f"{len(shard.samples)} requests) failed before the start: {why}; nothing was sent")


async def _supervise(ray, runs, actors, t0: int, hooks: Hooks, take) -> list[ShardRun | str]:
    """In an event loop (telemetry's client sampler runs in it): ``hooks.started(live)`` at t0,
    the nodes' counters polled into ``live`` and their new records taken every POLL_S
    (RECORDS_EVERY_S apart) until every shard has ended."""
    import asyncio

    await asyncio.sleep(max(0.0, (t0 - time.perf_counter_ns()) / 1e9))
    live = Live(arrays=[[0] * len(LIVE_FIELDS) for _ in actors])
    hooks.started(live)
    got, pending, polls = {}, list(runs), 0
    every = max(1, round(RECORDS_EVERY_S / POLL_S))
    while pending:
        await asyncio.sleep(POLL_S)
        polls += 1
        done, pending = ray.wait(pending, num_returns=len(pending), timeout=0)
        for ref in done:
            got[ref] = _outcome(ray, ref, actors)
            take(runs.index(ref), FINAL_TAKE_S)  # the rest of an ended shard (none from a dead one)
        if polls % every == 0:
            for k, ref in enumerate(runs):
                if ref in pending:
                    take(k)
        live.arrays = _counters(ray, actors, live.arrays)
        live.refresh()
    return [got[ref] for ref in runs]


def _counters(ray, actors, last: list) -> list:
    """Each node's counters now (a node that cannot answer keeps its last row)."""
    rows = []
    for actor, row in zip(actors, last):
        try:
            rows.append(ray.get(actor.counters.remote(), timeout=1.0))
        except Exception:  # a dead or busy actor: its last row stands
            rows.append(row)
    return rows


def _place(ray, node: str, config: BenchConfig, shard: Shard, tokenizer):
    return on_node(ray, ShardActor, node).remote(shard_config(config, shard), shard, tokenizer)


def on_node(ray, cls, node: str, num_cpus: float = 1):
    """``cls`` as a Ray actor pinned to ``node`` (node affinity, not soft), answering
    a few calls at once (``clock`` and ``release`` while ``run`` blocks)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    where = NodeAffinitySchedulingStrategy(node_id=node, soft=False)
    return ray.remote(num_cpus=num_cpus, max_concurrency=4)(cls).options(scheduling_strategy=where)


def clock_offset(ray, actor) -> tuple[int, int]:
    """(node clock − driver clock, its error bound) from the minimum-round-trip sample."""
    best = None
    for _ in range(CLOCK_SAMPLES):
        a = time.perf_counter_ns()
        r = ray.get(actor.clock.remote())
        b = time.perf_counter_ns()
        if best is None or b - a < best[0]:
            best = (b - a, r - (a + b) // 2)
    rtt, offset = best
    return offset, rtt // 2


def _outcome(ray, ref, actors) -> ShardRun | str:
    """A shard's run, or why its actor failed. A failure ends the run: the other shards
    are stopped and return what they completed."""
    try:
        return ray.get(ref)
    except Exception as exc:  # a dead actor or node, in Ray's words; named in the result
        for actor in actors:
            actor.stop.remote()  # fire and forget: the dead one's call fails, unread
        return f"{type(exc).__name__}: {first_line(exc)[:200]}"


def shifted(r: RequestRecord, by: int) -> RequestRecord:
    """A record from a node's clock onto the driver's (``by`` = −offset)."""
    return dataclasses.replace(r, intended_ns=r.intended_ns + by, dispatched_ns=r.dispatched_ns + by,
                               sent_ns=r.sent_ns + by, done_ns=r.done_ns + by,
                               token_ns=tuple(t + by for t in r.token_ns),
                               first_reasoning_ns=r.first_reasoning_ns and r.first_reasoning_ns + by,
                               first_answer_ns=r.first_answer_ns and r.first_answer_ns + by)  # 0: none seen


def _merged(shards: list[Shard], nodes: list[str], clocks, got, t0: int, returned: list[int]) -> WorkersRun:
    runs = [g for g in got if isinstance(g, ShardRun)]
    ends = [g.end_ns - off for g, (off, _) in zip(got, clocks) if isinstance(g, ShardRun)]
    failed = [g for g in got if not isinstance(g, ShardRun)]
    outcome = RunOutcome(t0, max(ends, default=t0), bool(failed) or any(g.interrupted for g in runs),
                         sum(g.not_sent for g in runs))
    run = BenchRun(outcome, min((g.wall_start for g in runs), default=time.time()),
                   max((g.cpu_s for g in runs), default=0.0))
    entries = [_entry(s, n, c, g, k) for s, n, c, g, k in zip(shards, nodes, clocks, got, returned)]
    lines = [f"Ray node {e['node'][:12]} (shard {e['worker']}) failed ({e['failed']}): {e['lost_requests']} "
             f"of its {e['requests']} requests are lost ({e['records']} returned before are kept)"
             for e in entries if e["failed"]]
    lines += [f"Ray node {e['node'][:12]} (shard {e['worker']}): {e['lost_requests']} of its records could not be "
              f"taken from it and are not counted" for e in entries if not e["failed"] and e["lost_requests"]]
    section = {"count": len(shards), "placement": "one actor per alive node, node affinity (not soft)",
               "start_perf_ns": t0, "concurrency_rule": CONCURRENCY_RULE,
               "max_concurrency_shares": [s.max_concurrency for s in shards],
               "clock": f"NTP-style, min round trip of {CLOCK_SAMPLES}; offset = node − driver",
               "per_worker": entries}
    return WorkersRun(run, section, lines, runs)


def _entry(shard: Shard, node: str, clock, got, returned: int) -> dict:
    offset, bound = clock
    entry = {"worker": shard.index, "node": node, "clock_offset_ns": offset, "clock_bound_ns": bound,
             "requests": len(shard.samples), "max_concurrency": shard.max_concurrency, "records": returned}
    if not isinstance(got, ShardRun):
        return {**entry, "failed": got, "lost_requests": len(shard.samples) - returned}
    # a batch the driver could not take in time is lost too: counted, never silent
    return {**entry, "failed": None, "lost_requests": got.made - returned, "cpu_s": got.cpu_s, "pid": got.pid}
