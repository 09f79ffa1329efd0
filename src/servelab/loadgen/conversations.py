"""Multi-turn runs: conversations replayed turn by turn, each turn with the history so far.

The arrival schedule (``--request-rate``, ``--burstiness``, the seed) paces conversation
*starts*, drawn exactly as a single-turn run draws its requests. Within a conversation,
turn k+1 is due ``think_time_s`` after turn k's reply ended, and carries every earlier
user message and the server's actual replies (answer text only: reasoning is not sent
back, as chat clients do). ``--max-concurrency`` keeps vLLM's meaning, requests in flight:
a conversation holds a slot only while a turn is being answered (a user reading is no
load), and a next turn waits for a slot in line with new conversations' first turns.

Unlike a single-turn run, one thing happens on the clock: the next turn needs the reply's
text, so its events are parsed when it ends. That work delays only that conversation's
next send, and shows as that turn's schedule lag (intended = reply end + think time).
A turn that fails ends its conversation: the next turn's history would be missing; the
turns never sent are counted (``abandoned_turns``).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, replace

from servelab.client import openai
from servelab.client.http import Pool
from servelab.client.sse import parse_events
from servelab.config import MultiTurnSpec
from servelab.clock import cpu_s
from servelab.loadgen.control import wait_ready, warm, warm_up
from servelab.loadgen.drive import schedule
from servelab.loadgen.hooks import Hooks
from servelab.loadgen.pacer import Attempt, Counters, RunOutcome, dispatch, send_one, wait_until
from servelab.loadgen.payloads import headers
from servelab.loadgen.responses import CUT, to_record
from servelab.loadgen.values import BenchConfig, BenchRun
from servelab.records import Conversation, RecordSink, RequestRecord, SampleRequest

_now = time.perf_counter_ns


@dataclass(slots=True)
class Turn:
    """One sent turn: the attempt, and the messages it carried (for its prompt length)."""

    conversation: int
    index: int
    attempt: Attempt
    messages: list[dict]


@dataclass(slots=True)
class Replay:
    """Everything the conversations did, appended to as they go (one event loop, no locks)."""

    multi: MultiTurnSpec  # how they were replayed
    turns: list[Turn] = field(default_factory=list)
    abandoned: int = 0  # turns never sent because an earlier turn of their conversation failed
    prompt_tokens_from: dict[str, int] = field(default_factory=dict)  # "usage" | "tokenizer" -> turns


def turns(conversations: list[Conversation]) -> list[SampleRequest]:
    """Every turn, conversation by conversation: what a multi-turn run's records are indexed by."""
    return [turn for conv in conversations for turn in conv.turns]


async def run_conversations(config: BenchConfig, conversations: list[Conversation], multi: MultiTurnSpec,
                            tokenizer, stop: asyncio.Event, counters: Counters | None = None, *,
                            sink: RecordSink, hooks: Hooks = Hooks()) -> tuple[BenchRun, Replay]:
    """Replay ``conversations``; ``stop`` ends the run early, keeping completed turns. Each
    turn's record goes to ``sink`` as the turn ends (indexed as ``turns``), so a records
    file holds it even if servelab is killed later; ``hooks.started`` at t0 may return a
    shared start (scale's replicas), as a single-turn run's does."""
    counters = counters or Counters()
    pool = Pool(config.base_url, verify_tls=config.verify_tls)
    replay = Replay(multi)
    first = _firsts(conversations)

    def on_turn(turn: Turn) -> None:
        record = turn_record(config, conversations[turn.conversation], turn, tokenizer, replay)
        sink.add(first[turn.conversation] + turn.index, record, counters.t0_ns)

    try:
        await _probe(config, pool, conversations[0].turns[0])
        offsets = schedule(config, conversations)  # one start per conversation
        await warm(config, pool, len(conversations))
        t0 = hooks.started(counters)  # a shared start (scale's replicas), or None: now
        cpu0, wall0 = cpu_s(), time.time()
        outcome = await _dispatch(pool, config, conversations, multi, offsets, stop, counters, replay, on_turn, t0)
        cpu = cpu_s() - cpu0
    finally:
        pool.close()
    _sink_turns(config, conversations, tokenizer, replay, outcome, sink)
    return BenchRun(outcome, wall0, cpu), replay


def _firsts(conversations: list[Conversation]) -> list[int]:
    """Each conversation's first turn's place among every conversation's turns."""
    first = [0]
    for conv in conversations:
        first.append(first[-1] + len(conv.turns))
    return first


def _sink_turns(config: BenchConfig, conversations, tokenizer, replay: Replay, outcome: RunOutcome,
                sink: RecordSink) -> None:
    """After the run, the sent turns that never ended (their records went as they ended):
    a turn cut by a stop is not measured."""
    first = _firsts(conversations)
    for t in replay.turns:
        if t.attempt.response is not None or not t.attempt.sent_ns:
            continue
        record = turn_record(config, conversations[t.conversation], t, tokenizer, replay)
        if not (outcome.interrupted and record.error == CUT):
            sink.add(first[t.conversation] + t.index, record, outcome.t0_ns)


async def _dispatch(pool: Pool, config: BenchConfig, conversations, multi, offsets, stop, counters,
                    replay: Replay, on_turn, t0_ns: int | None) -> RunOutcome:
    """Start each conversation at t0 + its offset: the pacer's loop (pacer.dispatch), one
    conversation a step, each then paced by its own replies."""
    sem = asyncio.Semaphore(config.load.max_concurrency) if config.load.max_concurrency else None
    stopper = asyncio.ensure_future(stop.wait())  # what each conversation's waits watch

    def release(i: int, intended: int) -> asyncio.Task:
        return asyncio.ensure_future(_converse(pool, config, multi, i, conversations[i], intended, sem, counters,
                                               replay, stopper, on_turn))

    try:
        done = await dispatch(offsets, release, stop, counters, t0_ns)
    finally:
        stopper.cancel()
    attempts = [t.attempt for t in replay.turns]
    total = sum(len(c.turns) for c in conversations)
    # a turn waiting for a concurrency slot when the stop came was never sent: not cut
    not_sent = total - sum(1 for a in attempts if a.sent_ns or a.response is not None) - replay.abandoned
    end = max((a.response.done_ns for a in attempts if a.response), default=_now())
    return RunOutcome(done.t0_ns, end, done.stopped or not_sent > 0, not_sent)


async def _turn(pool, payload: bytes, attempt: Attempt, sem, counters: Counters) -> None:
    """One turn under the run's concurrency cap (conversations hold no pacer sender slot)."""
    if sem is None:
        return await send_one(pool, payload, attempt, counters)
    async with sem:
        await send_one(pool, payload, attempt, counters)


async def _converse(pool: Pool, config: BenchConfig, multi: MultiTurnSpec, ci: int, conv: Conversation,
                    intended: int, sem, counters: Counters, replay: Replay, stopper, on_turn) -> None:
    history: list[dict] = []
    think_ns = round(multi.think_time_s * 1e9)
    for k, turn in enumerate(conv.turns):
        if not await wait_until(intended, stopper):
            return
        messages = [*history, {"role": "user", "content": turn.prompt}]
        attempt = Attempt(len(replay.turns), intended, dispatched_ns=_now())
        replay.turns.append(sent := Turn(ci, k, attempt, messages))
        counters.dispatched += 1
        counters.lag_ns = attempt.dispatched_ns - intended
        payload = _payload(config, pool, messages, turn)
        await _turn(pool, payload, attempt, sem, counters)
        on_turn(sent)  # its record, now: a kill later loses it no more
        reply = _reply(config, attempt)
        if reply is None:
            replay.abandoned += len(conv.turns) - k - 1
            return
        if multi.history:
            history = [*messages, {"role": "assistant", "content": reply}]
        intended = attempt.response.done_ns + think_ns


async def _probe(config: BenchConfig, pool: Pool, first: SampleRequest) -> None:
    """The ready check and warm-ups, with the first turn alone under its own id."""
    probe = _payload(config, pool, [{"role": "user", "content": first.prompt}],
                     replace(first, request_id=f"{first.request_id}-warmup"))
    if config.load.ready_check_timeout_s > 0:
        await wait_ready(config, pool, probe)
    if config.load.num_warmups > 0:
        await warm_up(config, pool, probe)


def _payload(config: BenchConfig, pool: Pool, messages: list[dict], turn: SampleRequest) -> bytes:
    body = openai.messages_body(config.model, messages, turn.expected_output_len, config.ignore_eos,
                                config.extra_body)
    return pool.build("POST", config.endpoint, body, headers(config, turn.request_id))


def _reply(config: BenchConfig, attempt: Attempt) -> str | None:
    """The answer text of a successful turn; None when the turn failed."""
    resp = attempt.response
    if resp is None or resp.error or resp.status != 200 or resp.closed_early:
        return None
    stream = openai.interpret(config.kind, parse_events(resp.reads))
    return None if stream.error or not stream.token_ns else stream.answer


def turn_record(config: BenchConfig, conv: Conversation, turn: Turn, tokenizer, replay: Replay) -> RequestRecord:
    """The turn's record; its prompt length is the server's ``usage.prompt_tokens`` (history
    included) when reported, else the tokenizer's count of every message's text (counted
    in ``replay.prompt_tokens_from``)."""
    sample = conv.turns[turn.index]
    record = to_record(config.kind, sample, turn.attempt, tokenizer, config.trace_seed)
    prompt_len, source = _prompt_tokens(turn, tokenizer)
    replay.prompt_tokens_from[source] = replay.prompt_tokens_from.get(source, 0) + 1
    return replace(record, prompt_len=prompt_len, conversation_id=conv.conversation_id, turn=turn.index)


def _prompt_tokens(turn: Turn, tokenizer) -> tuple[int, str]:
    resp = turn.attempt.response
    if resp is not None and resp.status == 200 and not resp.error:
        usage = openai.interpret("chat", parse_events(resp.reads)).prompt_tokens
        if usage is not None:
            return int(usage), "usage"
    texts = [m["content"] for m in turn.messages]
    return sum(len(ids) for ids in tokenizer.encode_batch(texts, add_special_tokens=False)), "tokenizer"
