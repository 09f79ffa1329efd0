"""One run's schedule split between client workers, and where their records go back.

Pure: the split and ``global_index`` take values and return values (loadgen/workers.py
runs the processes). The schedule is drawn once, as one worker would draw it, and
dealt round-robin — request ``j`` goes to worker ``j % n`` — so the union of the
shards' arrivals is exactly the single-worker schedule, and each shard offers
``1/n`` of the rate with the same burstiness pattern interleaved.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from servelab.records import SampleRequest

# --max-concurrency stays a cap on the whole run by splitting it: worker i gets
# floor(C/n) slots, plus one for the first C mod n workers (the shares sum to C).
# A shared cross-process semaphore would keep the slots pooled, but it puts a lock
# (a syscall when contended) on every request's hot path and couples the workers'
# event loops (a blocking acquire stalls a loop; an async one must poll). The cost
# of the split: while one worker's requests run long, its idle neighbour cannot lend
# it a slot, so the run is at most C in flight, sometimes below it.
CONCURRENCY_RULE = "split: worker i gets floor(C/n), +1 for i < C mod n (sum = C); no slot lending"


@dataclass(frozen=True, slots=True)
class Shard:
    """What one worker sends: its requests, their offsets from the shared t0, its cap."""

    index: int
    samples: tuple[SampleRequest, ...]
    offsets_ns: np.ndarray
    max_concurrency: int | None


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

