"""The fast mode's loop: a client and the simulated engine on one virtual clock.

The client is the benchmark's: request i is due at its arrival offset, and with a
concurrency cap it is sent when a slot frees (the earliest-freed slot, first come first
served), exactly as the real runner's semaphore would. A request reaches the engine
the API server's per-request cost (``StepModel.request_s``) after it was sent, and one
that arrives during a step joins the waiting queue at the next step, as it would reach
vLLM's engine core between two steps. No HTTP, no sleeping: a run of thousands of
requests takes well under a second per thousand.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field
from typing import Protocol

from servelab.sim.model import EngineLimits, SimRequest, StepModel
from servelab.sim.scheduler import EngineCounters, Scheduler, Seq

TOO_LONG = "request does not fit in the simulated KV cache (prompt + output > KV tokens)"


@dataclass(slots=True)
class Emission:
    """What one request got: when it was sent and each token's time (ns on the run's
    virtual clock, 0 = the first arrival offset's origin)."""

    sent_ns: int
    token_ns: list[int]
    error: str | None = None
    preemptions: int = 0
    cached_tokens: int = 0


@dataclass(slots=True)
class StepTrace:
    """The engine's state at the start of every step, after it was scheduled, and
    vLLM's counters so far (``steps_tokens_sum`` includes this step's tokens): one entry
    per step, not per interval (telemetry/sim_timeline.py resamples it into a Timeline)."""

    t_ns: list[int] = field(default_factory=list)
    running: list[int] = field(default_factory=list)
    waiting: list[int] = field(default_factory=list)
    kv_usage: list[float] = field(default_factory=list)
    step_tokens: list[int] = field(default_factory=list)
    preemptions: list[int] = field(default_factory=list)
    prefix_queries: list[int] = field(default_factory=list)
    prefix_hits: list[int] = field(default_factory=list)
    prompt_tokens: list[int] = field(default_factory=list)
    generation_tokens: list[int] = field(default_factory=list)
    steps_tokens_sum: list[int] = field(default_factory=list)

    def sample(self, t: int, sched: Scheduler, tokens: int) -> None:
        c = sched.counters
        self.t_ns.append(t)
        self.running.append(len(sched.running))
        self.waiting.append(len(sched.waiting))
        self.kv_usage.append(sched.pool.usage)
        self.step_tokens.append(tokens)
        self.preemptions.append(c.preemptions)
        self.prefix_queries.append(c.prefix_queries)
        self.prefix_hits.append(c.prefix_hits)
        self.prompt_tokens.append(c.prompt_tokens)
        self.generation_tokens.append(c.generation_tokens)
        self.steps_tokens_sum.append((self.steps_tokens_sum[-1] if self.steps_tokens_sum else 0) + tokens)


@dataclass(slots=True)
class SimResult:
    emissions: list[Emission]
    steps: StepTrace
    counters: EngineCounters
    end_ns: int


class Client(Protocol):
    """Who sends the requests: when the next one goes, which, and what it hears back. The
    benchmark's is ``ArrivalClient``; an agentic run's sends a call once its parents are done
    (loadgen/sim_sessions.py)."""

    def next_send_ns(self) -> int | None:
        """When the next request will be sent, if it is known yet."""

    def send(self) -> tuple[int, int]:
        """(its index, when it is sent): called once ``next_send_ns`` is due."""

    def done(self, index: int, t_ns: int, ok: bool) -> None:
        """Request ``index`` ended at ``t_ns`` (False: it failed)."""


class ArrivalClient:
    """Sends requests in arrival order, at most ``cap`` in flight."""

    def __init__(self, requests: list[SimRequest], cap: int | None) -> None:
        self.requests, self.cap, self.next = requests, cap, 0
        self.slots = [0] * cap if cap else None  # min-heap of times a slot became free

    def next_send_ns(self) -> int | None:
        """When the next request will be sent, if it is known yet (a slot is free)."""
        if self.next >= len(self.requests):
            return None
        due = self.requests[self.next].arrival_ns
        if self.slots is None:
            return due
        return max(due, self.slots[0]) if self.slots else None

    def send(self) -> tuple[int, int]:
        t = self.next_send_ns()
        if self.slots is not None:
            heapq.heappop(self.slots)
        self.next += 1
        return self.next - 1, t

    def done(self, index: int, t_ns: int, ok: bool) -> None:
        if self.slots is not None:
            heapq.heappush(self.slots, t_ns)


def simulate(requests: list[SimRequest], limits: EngineLimits, model: StepModel,
             max_concurrency: int | None = None, client: Client | None = None) -> SimResult:
    """Run ``requests`` (sorted by arrival, unless ``client`` picks when each goes) through the
    engine; return what each got (None for a request the client never sent)."""
    sched = Scheduler(limits, model)
    client = client if client is not None else ArrivalClient(requests, max_concurrency)
    emissions: list[Emission | None] = [None] * len(requests)
    seqs: list[Seq | None] = [None] * len(requests)
    pending: deque[tuple[int, int]] = deque()  # (when the API server hands it on, index), in send order
    steps, t = StepTrace(), 0
    while True:
        _deliver(client, sched, requests, emissions, seqs, t, pending, model.request_ns)
        step = sched.begin(t)
        if step is None:
            due = [x for x in (client.next_send_ns(), pending[0][0] if pending else None) if x is not None]
            if not due:
                break
            t = max(t, min(due))
            continue
        steps.sample(t, sched, step.tokens)
        for seq in sched.end(step):
            emissions[seq.index].token_ns = seq.token_ns
            client.done(seq.index, step.end_ns, True)
        t = step.end_ns
    _finish(emissions, seqs)
    return SimResult(emissions, steps, sched.counters, t)


def _deliver(client: Client, sched: Scheduler, requests, emissions, seqs, t: int,
             pending: deque[tuple[int, int]], delay_ns: int) -> None:
    """Hand the engine every request sent by ``t`` and past the API server's ``delay_ns`` (in
    send order: the delay is the same for all); a request that can never fit fails at once (as
    vLLM rejects it) and frees its slot, which the next request may take at once."""
    while True:
        while (due := client.next_send_ns()) is not None and due <= t:
            i, sent = client.send()
            emissions[i] = Emission(sent, [])
            pending.append((sent + delay_ns, i))
        if not pending or pending[0][0] > t:
            return
        ready, i = pending.popleft()
        req = requests[i]
        if not sched.fits(req):
            emissions[i].error = TOO_LONG
            client.done(i, ready, False)
            continue
        seqs[i] = Seq(i, req, sched.limits.block_size, sched.limits.enable_prefix_caching)
        sched.add(seqs[i])


def _finish(emissions: list[Emission], seqs: list[Seq | None]) -> None:
    for em, seq in zip(emissions, seqs):
        if seq is not None:
            em.token_ns, em.preemptions, em.cached_tokens = seq.token_ns, seq.preemptions, seq.cache_hit_tokens
