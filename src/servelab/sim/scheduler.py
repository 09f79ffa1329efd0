"""vLLM V1's scheduler, one step at a time, on a clock the caller owns.

Facts followed (vLLM's ``v1/core/sched/scheduler.py``, FCFS policy):
* One token budget per step (``max_num_batched_tokens``). Running requests are served
  first, in order, each its remaining tokens up to the budget left (a long prompt is
  chunked over steps: chunked prefill); then waiting requests, first come first served,
  while the budget lasts and fewer than ``max_num_seqs`` run.
* When a running request needs a KV block and none is free, the newest running request
  is preempted: its blocks are freed, it goes back to the front of the waiting queue and
  is recomputed from scratch (its prompt and the tokens it had generated) later. If the
  newest is the request itself, it waits. No waiting request is admitted in a step that
  preempted.
* A waiting request starting from zero looks up the prefix cache first (``kv.py``).
* A request emits a token at the end of the step that computes its last missing token.

Simplifications (said here so nobody mistakes them for vLLM's): prefix-cache statistics
are counted once per admission (vLLM counts each lookup); output tokens are never hashed
(they have no ids here), so a preempted request re-hits only its prompt's blocks.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from servelab.sim.kv import BlockPool, block_hashes
from servelab.sim.model import EngineLimits, SimRequest, StepModel


class Seq:
    """A request's state inside the engine (mutable; the engine's own)."""

    __slots__ = ("index", "prompt_len", "output_len", "hashes", "computed", "generated",
                 "cached", "plain", "n_hashed", "token_ns", "preemptions", "cache_hit_tokens", "aborted")

    def __init__(self, index: int, req: SimRequest, block_size: int, caching: bool) -> None:
        self.index = index
        self.prompt_len = req.prompt_len
        self.output_len = req.output_len
        ids = req.token_ids if caching else None
        self.hashes = block_hashes(ids[:req.prompt_len], block_size) if ids is not None else []
        self.computed = 0  # tokens whose KV is in the cache
        self.generated = 0
        self.cached: list[int] = []  # hashes of the cached blocks it uses
        self.plain = 0  # blocks it holds that are not in the prefix cache
        self.n_hashed = 0  # prompt blocks already looked up or cached
        self.token_ns: list[int] = []
        self.preemptions = 0
        self.cache_hit_tokens = 0
        self.aborted = False  # its client went away (the real-time server only)

    @property
    def num_tokens(self) -> int:
        return self.prompt_len + self.generated

    @property
    def blocks(self) -> int:
        return len(self.cached) + self.plain


@dataclass(slots=True)
class Step:
    """One scheduled step: who computes how many tokens, and when it ends."""

    start_ns: int
    end_ns: int
    work: list[tuple[Seq, int]]
    tokens: int


@dataclass(slots=True)
class EngineCounters:
    """vLLM's engine counters (not the client's: loadgen/pacer.Counters), same meaning (prefix ones in tokens)."""

    preemptions: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    prefix_queries: int = 0
    prefix_hits: int = 0
    steps: int = 0
    step_tokens: int = 0  # summed over steps (vLLM's iteration_tokens histogram's sum)
    finished: list[int] = field(default_factory=list)


class Scheduler:
    def __init__(self, limits: EngineLimits, model: StepModel) -> None:
        self.limits, self.model = limits, model
        self.pool = BlockPool(limits.num_blocks)
        self.running: list[Seq] = []
        self.waiting: deque[Seq] = deque()
        self.counters = EngineCounters()

    def add(self, seq: Seq) -> None:
        self.waiting.append(seq)

    def fits(self, req: SimRequest) -> bool:
        """A request whose whole sequence exceeds the KV cache could never finish."""
        return -(-(req.prompt_len + req.output_len) // self.limits.block_size) <= self.limits.num_blocks

    @property
    def idle(self) -> bool:
        return not self.running and not self.waiting

    def begin(self, now_ns: int) -> Step | None:
        """Schedule a step starting at ``now_ns``; None when there is nothing to do."""
        budget = self.limits.max_num_batched_tokens
        work, budget, preempted = self._schedule_running(budget)
        if not preempted:
            budget = self._admit_waiting(work, budget)
        if not work:
            return None
        tokens = self.limits.max_num_batched_tokens - budget
        context = sum(seq.computed + n for seq, n in work)
        pairs = sum(n * (seq.computed + n / 2) for seq, n in work)  # attention's query x key pairs
        return Step(now_ns, now_ns + self.model.step_ns(len(work), tokens, context, pairs), work, tokens)

    def _schedule_running(self, budget: int) -> tuple[list[tuple[Seq, int]], int, bool]:
        work: list[tuple[Seq, int]] = []
        running, bs = self.running, self.limits.block_size
        preempted, i = False, 0
        while i < len(running) and budget > 0:
            seq = running[i]
            n = min(seq.num_tokens - seq.computed, budget)
            need = -(-(seq.computed + n) // bs) - seq.blocks
            while need > self.pool.free_plain + len(self.pool.evictable):
                preempted = True
                victim = running.pop()
                self._preempt(victim)
                if victim is seq:
                    break
            else:
                if need > 0:
                    self.pool.take_plain(need)
                    seq.plain += need
                work.append((seq, n))
                budget -= n
                i += 1
        return work, budget, preempted

    def _preempt(self, seq: Seq) -> None:
        self.pool.release(seq.cached, seq.plain)
        seq.cached, seq.plain, seq.computed, seq.n_hashed = [], 0, 0, 0
        seq.preemptions += 1
        self.counters.preemptions += 1
        self.waiting.appendleft(seq)

    def _admit_waiting(self, work: list[tuple[Seq, int]], budget: int) -> int:
        limits, pool, waiting = self.limits, self.pool, self.waiting
        while waiting and budget > 0 and len(self.running) < limits.max_num_seqs:
            seq = waiting[0]
            hit = self._lookup(seq)
            start = len(hit) * limits.block_size
            n = min(seq.num_tokens - start, budget)
            need = -(-(start + n) // limits.block_size) - len(hit)
            if not pool.can_take(need, hit):
                break
            waiting.popleft()
            pool.take(need, hit)
            self._count_admission(seq, hit, start)
            seq.cached, seq.plain, seq.computed, seq.n_hashed = hit, need, start, len(hit)
            self.running.append(seq)
            work.append((seq, n))
            budget -= n
        return budget

    def _lookup(self, seq: Seq) -> list[int]:
        if not seq.hashes:
            return []
        return self.pool.longest_hit(seq.hashes, (seq.num_tokens - 1) // self.limits.block_size)

    def _count_admission(self, seq: Seq, hit: list[int], start: int) -> None:
        c = self.counters
        if self.limits.enable_prefix_caching:
            c.prefix_queries += seq.num_tokens
            c.prefix_hits += start
        if seq.preemptions == 0:
            c.prompt_tokens += seq.prompt_len
            seq.cache_hit_tokens = start

    def end(self, step: Step) -> list[Seq]:
        """Apply a step at its end time: KV filled, tokens emitted; returns who finished."""
        finished, t, emitted = [], step.end_ns, 0
        for seq, n in step.work:
            if seq.aborted:
                continue
            seq.computed += n
            if seq.n_hashed < len(seq.hashes):
                self._cache_full_blocks(seq)
            if seq.computed == seq.num_tokens:
                seq.generated += 1
                seq.token_ns.append(t)
                emitted += 1
                if seq.generated >= seq.output_len:
                    finished.append(seq)
        self.counters.generation_tokens += emitted
        self.counters.steps += 1
        self.counters.step_tokens += step.tokens
        for seq in finished:
            self.running.remove(seq)
            self.pool.release(seq.cached, seq.plain)
            seq.cached, seq.plain = [], 0
            self.counters.finished.append(seq.index)
        return finished

    def abort(self, seq: Seq) -> None:
        """The client went away: drop it wherever it is and free its blocks."""
        if seq.aborted or seq.generated >= seq.output_len:
            return
        seq.aborted = True
        if seq in self.running:
            self.running.remove(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)
            return  # a waiting request holds no blocks
        self.pool.release(seq.cached, seq.plain)
        seq.cached, seq.plain = [], 0

    def _cache_full_blocks(self, seq: Seq) -> None:
        full = min(len(seq.hashes), seq.computed // self.limits.block_size)
        for k in range(seq.n_hashed, full):
            if self.pool.cache(seq.hashes[k]):
                seq.cached.append(seq.hashes[k])
                seq.plain -= 1
        seq.n_hashed = max(seq.n_hashed, full)
