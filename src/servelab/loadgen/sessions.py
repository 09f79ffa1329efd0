"""Agentic sessions replayed as DAGs of calls (datasets/agentic.py), on the pacer's dispatch.

The arrival schedule (``--request-rate``, the seed; all at t0 by default) paces session
*starts*, one step of ``pacer.dispatch`` each, as multi-turn paces conversations. Within a
session each call is sent ``wait_s`` after the last of its parents completed (a root: after
the session's start): a sub-agent's first call after the call that spawned it, so sibling
sub-agents run concurrently, and a join after every child it waits for. ``--max-concurrency``
caps calls in flight; a call waiting for its parents or its wait holds no slot.

Prompts are token ids to ``/v1/completions`` (block-exact: datasets/agentic.Blocks makes a
call's ids as it is sent, so a run holds one copy of each block, not of each prompt); with
``--backend openai-chat``, chat messages, tool calls included (loadgen/tool_turns.py).
``--max-sessions N`` holds sessions to N lanes (AgentX's ``--concurrency``): a session due
while every lane is taken starts when one frees, its roots' waits counted from then. Under
``--agentic-locked`` the lanes recycle (datasets/agentx.py): each takes the next session in
order when its own has drained, until ``Sessions.until_s`` after t0; the sessions it never took
are not the run's (``Agentic.work`` is then the sessions taken, ``Sessions.taken``). A call
that fails cuts its session: the calls that depend on it are never sent (counted as
``abandoned``); the session is reported cut, with the calls it had done.

The trace's ideal prefix-cache hit rate (datasets/agentic.ideal_hits): an unbounded cache
seeing every prompt in call order at the engine's block size, by vLLM's rule; the rate is hit
tokens / prompt tokens, as the engine's own ``prefix_cache_hits / prefix_cache_queries``.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass, field, replace

from servelab.client.http import Pool
from servelab.clock import cpu_s
from servelab.datasets.agentic import Sessions, ideal_hits
from servelab.errors import InputError
from servelab.loadgen.agentx import send_warmups
from servelab.loadgen.control import wait_ready, warm_up
from servelab.loadgen.drive import schedule
from servelab.loadgen.hooks import Hooks
from servelab.loadgen.pacer import Attempt, Counters, RunOutcome, dispatch, send_one, wait_until
from servelab.loadgen.payloads import serialize
from servelab.loadgen.responses import to_record
from servelab.loadgen.tool_turns import ChatTurns
from servelab.loadgen.values import BenchConfig, BenchRun
from servelab.records import RecordSink, SampleRequest

_now = time.perf_counter_ns

ENGINE_BLOCK_SIZE = 16  # vLLM's default --block-size: the ideal is computed at it


@dataclass(slots=True)
class Agentic:
    """What the sessions did, appended to as they go (one event loop, no locks)."""

    work: Sessions
    attempts: dict[int, Attempt] = field(default_factory=dict)  # request index -> its attempt
    failed: dict[int, int] = field(default_factory=dict)  # session -> its failed calls
    abandoned: dict[int, int] = field(default_factory=dict)  # session -> calls never sent for a failed parent
    timing: dict[int, tuple[int, int]] = field(default_factory=dict)  # request index -> (TTFT, E2E) ns, answered
    warmups: list = field(default_factory=list)  # --agentic-locked: the warm-up turns' responses (loadgen/agentx.py)
    chat: ChatTurns | None = None  # a chat run's messages and replies (None: token ids)
    lanes: int | None = None  # --max-sessions: sessions under way at most
    drawn: int | None = None  # recycled lanes: the sessions taken (the first ``drawn`` of ``work``)

    def section(self, engine_block_size: int = ENGINE_BLOCK_SIZE) -> dict:
        """The result's ``agentic`` section: where the sessions came from, the ideal hit rate,
        and each session's makespan, calls and TTFT / E2E per call (ms)."""
        chat = {"chat": self.chat.section()} if self.chat else {}
        chat |= {"max_sessions": self.lanes} if self.lanes else {}
        return {**self.work.about, "ideal_prefix_cache_hit_rate": round(ideal_rate(self.work, engine_block_size), 4),
                "ideal_at_block_size": engine_block_size, **chat, "per_session": self.per_session()}

    def per_session(self) -> list[dict]:
        first, out = self.work.first(), []
        for si, s in enumerate(self.work.sessions):
            got = [self.attempts.get(first[si] + k) for k in range(len(s.calls))]
            done = [a for a in got if a is not None and a.response is not None]
            out.append({"session": s.session_id, "calls": len(s.calls), "sent": len(done),
                        "failed": self.failed.get(si, 0), "abandoned": self.abandoned.get(si, 0),
                        "cut": bool(self.failed.get(si)) or len(done) < len(s.calls),
                        "ttft_ms": [_ms(self.timing, first[si] + k, 0) for k in range(len(s.calls))],
                        "e2e_ms": [_ms(self.timing, first[si] + k, 1) for k in range(len(s.calls))],
                        "makespan_s": round((max(a.response.done_ns for a in done)
                                             - min(a.sent_ns for a in done)) / 1e9, 6) if done else None,
                        **(self.chat.per_session(si, first[si], len(s.calls)) if self.chat else {})})
        return out


def summary_line(section: dict) -> str:
    """The run's sessions in one console line (the result's ``agentic`` section has them all)."""
    spans = sorted(s["makespan_s"] for s in section["per_session"] if s["makespan_s"] is not None)
    cut = sum(s["cut"] for s in section["per_session"])
    n = section.get("max_sessions")
    lanes = f" in {n} lane{'s' if n != 1 else ''}" if n else ""
    if (section.get("locked") or {}).get("recycled"):
        lanes += f" recycled until {section['locked']['recycled']['until_s']:g} s"
    scaled = f"; scaled ×{section['trace_scale']} (blocks of {'/'.join(map(str, section['block_size']))} tokens)" \
        if section.get("scaled") else ""
    made = f"{spans[len(spans) // 2]:.2f} s median, {spans[-1]:.2f} s max" if spans else "none completed"
    return (f"servelab: agentic: {section['sessions']} sessions{lanes}, {section['calls']} calls, {section['sub_agents']} "
            f"sub-agents (fan-out up to {section['max_fan_out']}){scaled}; makespan {made}; {cut} cut; ideal "
            f"prefix-cache hit rate {section['ideal_prefix_cache_hit_rate']:.1%} at block size "
            f"{section['ideal_at_block_size']}")


def _ms(timing: dict, i: int, which: int) -> float | None:
    """A call's TTFT (0) or E2E (1) in ms; None: it failed or never went."""
    return round(timing[i][which] / 1e6, 3) if i in timing else None


def ideal_rate(work: Sessions, block_size: int = ENGINE_BLOCK_SIZE) -> float:
    """The sessions' ideal prefix-cache hit rate: every call's prompt in order (0 with no prompt token)."""
    hits, queries = ideal_hits(work.sessions, block_size, work.warm)
    return hits / queries if queries else 0.0


async def run_sessions(config: BenchConfig, work: Sessions, tokenizer, stop: asyncio.Event,
                       counters: Counters | None = None, *, sink: RecordSink,
                       hooks: Hooks = Hooks(), offsets_ns=None) -> tuple[BenchRun, Agentic]:
    """Replay ``work``'s sessions; each call's record goes to ``sink`` as it ends (indexed as
    ``work.requests``). ``stop`` ends the run early, keeping what completed. ``offsets_ns``:
    each session's start (a shard's share of the run's schedule); None: drawn here."""
    if config.kind not in ("completions", "chat"):
        raise InputError(f"agentic sessions are sent as completions or chat requests, not {config.kind}")
    counters = counters or Counters()
    pool = Pool(config.base_url, verify_tls=config.verify_tls)
    agentic = Agentic(work, chat=ChatTurns(config, work, tokenizer) if config.kind == "chat" else None,
                      lanes=config.load.max_sessions)
    try:
        await _probe(config, pool, work, agentic.chat)
        agentic.warmups = await send_warmups(config, pool, work)  # none unless --agentic-locked
        offsets = schedule(config, work.sessions) if offsets_ns is None else offsets_ns  # one start per session
        t0 = hooks.started(counters)
        cpu0, wall0 = cpu_s(), time.time()
        outcome = await _dispatch(pool, config, work, offsets, stop, counters, agentic, tokenizer, sink, t0)
        cpu = cpu_s() - cpu0
    finally:
        pool.close()
    if agentic.drawn is not None:
        agentic.work = work.taken(agentic.drawn)
    return BenchRun(outcome, wall0, cpu), agentic


async def _probe(config: BenchConfig, pool: Pool, work: Sessions, chat: ChatTurns | None) -> None:
    """The ready check and warm-ups: a prompt as long as the first call's, of tokens no call
    has, under its own id — the first call's own would warm the prefix cache with its blocks."""
    first = work.requests[0]
    ids = work.blocks.tokens("servelab-probe", first.prompt_len)
    rid = f"{first.request_id}-warmup"
    sample = replace(first, prompt=tuple(ids), request_id=rid)
    probe = chat.probe(pool, ids, sample) if chat else serialize(config, sample, pool, rid)
    if config.load.ready_check_timeout_s > 0:
        await wait_ready(config, pool, probe)
    if config.load.num_warmups > 0:
        await warm_up(config, pool, probe)


async def _dispatch(pool, config, work: Sessions, offsets, stop, counters, agentic: Agentic, tokenizer, sink,
                    t0_ns) -> RunOutcome:
    sem = asyncio.Semaphore(config.load.max_concurrency) if config.load.max_concurrency else None
    stopper = asyncio.ensure_future(stop.wait())
    first = work.first()

    def on_done(si: int, i: int, attempt: Attempt) -> None:
        record = to_record(config.kind, work.requests[i], attempt, tokenizer)
        if record.error is None:
            agentic.timing[i] = (record.ttft_ns, record.e2el_ns)
        sink.add(i, replace(record, conversation_id=work.sessions[si].session_id, turn=i - first[si]),
                 counters.t0_ns)

    lanes = asyncio.Semaphore(config.load.max_sessions) if config.load.max_sessions else None

    async def in_lane(run: _Session, intended: int) -> None:
        """A session under --max-sessions: it starts when a lane is free (its roots' waits count
        from then), and holds the lane until its last call ended. Waiters get lanes in start order."""
        async with lanes:
            await run.go(max(intended, _now()))

    def session(si: int) -> _Session:
        return _Session(pool, config, work, si, first[si], sem, counters, agentic, stopper, on_done)

    def release(si: int, intended: int) -> asyncio.Task:
        run = session(si)
        return asyncio.ensure_future(run.go(intended) if lanes is None else in_lane(run, intended))

    n = config.load.max_sessions
    if n and work.until_s is not None:  # recycled lanes: one task per lane, taking sessions in order
        taken = itertools.count(n)
        agentic.drawn = min(n, len(work.sessions))

        async def lane(si: int, start_ns: int) -> None:
            deadline = counters.t0_ns + round(work.until_s * 1e9)
            while True:
                await session(si).go(max(start_ns, _now()))
                si, start_ns = next(taken), _now()
                if si >= len(work.sessions) or start_ns >= deadline or stop.is_set():
                    return  # in order, on one loop: the sessions taken stay the first ``drawn``
                agentic.drawn = si + 1

        offsets, release = offsets[:n], lambda si, intended: asyncio.ensure_future(lane(si, intended))
    try:
        done = await dispatch(offsets, release, stop, counters, t0_ns)
    finally:
        stopper.cancel()
    attempts = list(agentic.attempts.values())
    abandoned = sum(agentic.abandoned.values())
    not_sent = (len(work.requests) if agentic.drawn is None else first[agentic.drawn]) - len(attempts)
    end = max((a.response.done_ns for a in attempts if a.response), default=_now())
    return RunOutcome(done.t0_ns, end, done.stopped or not_sent > abandoned, not_sent)


class _Session:
    """One session's calls, each a task waiting for its parents' futures."""

    def __init__(self, pool, config, work: Sessions, si: int, base: int, sem, counters, agentic, stopper,
                 on_done) -> None:
        self.pool, self.config, self.work, self.si, self.base = pool, config, work, si, base
        self.session = work.sessions[si]
        self.sem, self.counters, self.agentic, self.stopper, self.on_done = sem, counters, agentic, stopper, on_done
        self.ended: list[asyncio.Future] = []  # per call: its done_ns, or None if it failed or never went

    async def go(self, start_ns: int) -> None:
        loop = asyncio.get_running_loop()
        self.ended = [loop.create_future() for _ in self.session.calls]
        await asyncio.gather(*(self._call(k, start_ns) for k in range(len(self.session.calls))))

    async def _call(self, k: int, start_ns: int) -> None:
        call, ended = self.session.calls[k], self.ended[k]
        try:
            parents = [await self.ended[p] for p in call.parents]
            if any(p is None for p in parents):
                self.agentic.abandoned[self.si] = self.agentic.abandoned.get(self.si, 0) + 1
                return ended.set_result(None)
            intended = max(parents, default=start_ns) + round(call.wait_s * 1e9)
            if not await wait_until(intended, self.stopper):
                return ended.set_result(None)
            ended.set_result(await self._send(k, intended))
        finally:
            if not ended.done():  # cancelled by a stop: nothing waits on it any more
                ended.cancel()

    async def _send(self, k: int, intended: int) -> int | None:
        i = self.base + k
        sample: SampleRequest = self.work.requests[i]
        attempt = Attempt(i, intended, dispatched_ns=_now())
        self.agentic.attempts[i] = attempt
        self.counters.dispatched += 1
        self.counters.lag_ns = attempt.dispatched_ns - intended
        chat = self.agentic.chat
        payload = chat.payload(self.pool, self.si, k, i) if chat else serialize(
            self.config, replace(sample, prompt=tuple(self.work.blocks.prompt(self.session, k))), self.pool,
            sample.request_id)
        if self.sem is None:
            await send_one(self.pool, payload, attempt, self.counters)
        else:
            async with self.sem:
                await send_one(self.pool, payload, attempt, self.counters)
        self.on_done(self.si, i, attempt)
        if chat:
            chat.answered(self.si, k, i, attempt)
        resp = attempt.response
        if resp.error or resp.status != 200 or resp.closed_early:
            self.agentic.failed[self.si] = self.agentic.failed.get(self.si, 0) + 1
            return None
        return resp.done_ns
