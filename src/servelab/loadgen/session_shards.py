"""Agentic sessions split between client workers (``--workers N``) or Ray nodes (``--ray``).

A session stays on one shard: its calls wait on each other's replies, and its blocks are
its own, so splitting it would put a network hop (and another client's clock) between a
call and its parent. The run's schedule is drawn once over the sessions, as one process
draws it, and whole sessions are dealt round-robin — session ``j`` to shard ``j % n`` with
its start — so the union of the shards is the single-process run. Each shard carries its
calls' places in the run (``Shard.indices``) so its records land where a single process
would put them, and sends back its sessions' figures (``ShardRun.sessions``), merged here
in session order; a shard lost mid-run leaves its sessions reported as not sent (cut).
"""

from __future__ import annotations

import numpy as np

from servelab.datasets.agentic import Sessions
from servelab.errors import InputError
from servelab.loadgen.drive import schedule
from servelab.loadgen.sessions import Agentic
from servelab.loadgen.shards import Shard, ShardRun, concurrency_shares
from servelab.loadgen.values import BenchConfig


def split_sessions(config: BenchConfig, work: Sessions, n: int, what: str) -> list[Shard]:
    """Deal whole sessions round-robin into ``n`` shards, each with its sessions' starts."""
    if len(work.sessions) < n:
        raise InputError(f"{what}: only {len(work.sessions)} sessions to share between {n} (a session stays on one)")
    offsets = np.asarray(schedule(config, work.sessions), dtype=np.int64)
    first, caps = work.first(), concurrency_shares(config.load.max_concurrency, n)
    shards = []
    for k in range(n):
        picked = range(k, len(work.sessions), n)
        indices = tuple(i for si in picked for i in range(first[si], first[si + 1]))
        part = Sessions(tuple(work.sessions[si] for si in picked), tuple(work.requests[i] for i in indices),
                        work.about, work.blocks)
        shards.append(Shard(k, part.requests, offsets[k::n], caps[k], part, indices))
    return shards


def merged(work: Sessions, runs: list[ShardRun], n: int) -> Agentic:
    """The run's sessions, as one process would report them, from every shard's."""
    per = Agentic(work).per_session()  # a session whose shard never reported: nothing sent, cut
    for run in runs:
        for j, session in enumerate(run.sessions):
            per[run.index + j * n] = session
    return _Reported(work, per)


class _Reported(Agentic):
    """An agentic run reported by its shards: their sessions' figures, not attempts seen here."""

    __slots__ = ("reported",)

    def __init__(self, work: Sessions, reported: list[dict]) -> None:
        super().__init__(work)
        self.reported = reported

    def per_session(self) -> list[dict]:
        return self.reported
