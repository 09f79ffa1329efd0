"""Agentic sessions (layer 1): one model of a coding agent's traffic, whoever wrote it down.

A session is a DAG of calls. A call's input is a run of shared blocks — hash ids of
``block_size`` tokens each, the same id the same tokens within its scope — cut to
``input_len`` tokens, then new tokens up to ``input_len`` that no other call has; it asks
for ``output_len`` tokens; it is sent ``wait_s`` after the last of its ``parents``
completed (a tool's run time, or the user's think time). A sub-agent's first call has the
parent-agent call that spawned it as its parent; the parent's call that joins it lists the
sub-agent's last call among its parents. Calls are listed parents first.

Scopes: a WEKA trace numbers hash ids per conversation, and a sub-agent's cache context is
its own (TRACE_FORMAT.md: sub-agents "start fresh — they do NOT inherit the parent's
cache"), so a block's tokens are keyed by (session, agent, hash id): the same id in two
scopes is two different blocks.

Prompts are token ids (block-exact: no text round trip can merge or split a block). A
block's tokens are ``random.Random(seed).choices(vocabulary, k=block_size)``, ``seed`` the
stable hash timed_trace uses of the block's key; a short last block (a trace may give
⌈in / block_size⌉ ids) is the prefix of its full block, vLLM's rule.

``--trace-scale F`` fits long contexts to a small engine: the block size becomes
``max(1, round(block_size × F))`` and every length is scaled by that block ratio, so the
sharing (which call reuses which blocks) is kept and only the token counts shrink.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field

from servelab.datasets.timed_trace import vllm_key_seed
from servelab.records import SampleRequest


@dataclass(frozen=True, slots=True)
class Call:
    """One model call of a session (see the module's docstring)."""

    agent: str  # "" for the session's main agent, else the sub-agent's id (its block scope)
    blocks: tuple[int, ...]  # hash ids, in prompt order
    input_len: int
    output_len: int
    parents: tuple[int, ...] = ()  # indices of calls of the same session that must complete first
    wait_s: float = 0.0  # after the last parent completed (the session's start for a root)
    t_s: float | None = None  # when it was sent in the recorded run, s from the session's start (None: not recorded)
    # its new input is a tool's result: its agent's call before it ended in a tool call (a
    # scripted tool turn; a chat replay sends that call and the result, datasets/agentic_chat.py)
    tool_result: bool = False


@dataclass(frozen=True, slots=True)
class Session:
    session_id: str
    block_size: int
    calls: tuple[Call, ...]

    def children(self) -> list[list[int]]:
        """Each call's children: the calls waiting for it."""
        out: list[list[int]] = [[] for _ in self.calls]
        for i, call in enumerate(self.calls):
            for p in call.parents:
                out[p].append(i)
        return out


@dataclass(frozen=True, slots=True)
class Sessions:
    """A run's sessions, the requests its records are indexed by (every call, session by
    session), and what made them (the result says so: source, scale)."""

    sessions: tuple[Session, ...]
    requests: tuple[SampleRequest, ...]
    about: dict = field(default_factory=dict)
    blocks: Blocks | None = None  # makes each call's prompt when it is sent
    warm: tuple[Session, ...] = ()  # calls sent before the run, not measured (--agentic-locked's warm-ups)
    # --agentic-locked with --max-sessions: lanes take sessions in order until this long after t0
    # (datasets/agentx.py: recycled lanes); the run's records are then those of the sessions taken
    until_s: float | None = None

    def first(self) -> list[int]:
        """Each session's first call's place in ``requests``."""
        first = [0]
        for s in self.sessions:
            first.append(first[-1] + len(s.calls))
        return first


    def taken(self, n: int) -> Sessions:
        """The first ``n`` sessions, as the run took them (recycled lanes): their requests, and
        the figures of what was sent (``describe``) in ``about``."""
        kept = self.sessions[:n]
        return dataclasses.replace(self, sessions=kept, requests=self.requests[:self.first()[len(kept)]],
                                   about={**self.about, **describe(kept)})


def bundle(sessions: list[Session], prefix: str, about: dict, blocks: Blocks | None = None,
           warm: tuple[Session, ...] = (), until_s: float | None = None) -> Sessions:
    """``sessions`` with a request per call (its prompt is made at send time, by ``blocks``)."""
    requests = tuple(SampleRequest((), c.input_len, c.output_len, f"{prefix}{s.session_id}-{k}")
                     for s in sessions for k, c in enumerate(s.calls))
    return Sessions(tuple(sessions), requests, about, blocks, warm, until_s)


def scale(sessions: list[Session], factor: float) -> list[Session]:
    """Every session with its lengths scaled (see the module's docstring); 1: unchanged."""
    if factor == 1:
        return sessions
    out = []
    for s in sessions:
        size = max(1, round(s.block_size * factor))
        ratio = size / s.block_size
        calls = tuple(dataclasses.replace(c, input_len=_scaled(c, s.block_size, size, ratio),
                                          output_len=max(1, round(c.output_len * ratio))) for c in s.calls)
        out.append(Session(s.session_id, size, calls))
    return out


def _scaled(call: Call, old: int, new: int, ratio: float) -> int:
    """A call's input at block size ``new``: its full blocks whole, the rest scaled."""
    full = min(len(call.blocks), call.input_len // old)
    rest = call.input_len - full * old
    return full * new + round(rest * ratio)


def cap_waits(sessions: list[Session], most_s: float | None) -> tuple[list[Session], int]:
    """Every call's wait capped at ``most_s`` (None: unchanged), and how many were cut."""
    if most_s is None:
        return sessions, 0
    cut = sum(c.wait_s > most_s for s in sessions for c in s.calls)
    return [dataclasses.replace(s, calls=tuple(dataclasses.replace(c, wait_s=min(c.wait_s, most_s)) for c in s.calls))
            for s in sessions], cut


class Blocks:
    """Token ids of blocks and new tokens, each block made once (keyed by its scope)."""

    def __init__(self, vocab: list[int]) -> None:
        self.vocab = vocab
        self.made: dict[str, list[int]] = {}

    def tokens(self, key: str, n: int) -> list[int]:
        if key not in self.made:
            self.made[key] = random.Random(vllm_key_seed(key)).choices(self.vocab, k=n)
        return self.made[key]

    def prompt(self, session: Session, index: int) -> list[int]:
        """Call ``index``'s prompt: its blocks' tokens cut to its length, then its new tokens."""
        call, size = session.calls[index], session.block_size
        ids: list[int] = []
        for h in call.blocks:
            if len(ids) >= call.input_len:
                break
            ids += self.tokens(f"{session.session_id}/{call.agent}/{h}:{size}", size)[:call.input_len - len(ids)]
        new = call.input_len - len(ids)
        if new > 0:  # not kept: no other call has them
            ids += random.Random(vllm_key_seed(f"{session.session_id}/{index}:new")).choices(self.vocab, k=new)
        return ids


def ideal_hits(sessions, block_size: int, warm=()) -> tuple[int, int]:
    """(hit tokens, prompt tokens) of an unbounded prefix cache of ``block_size``-token blocks
    seeing every call's prompt in order, by vLLM's rule: a prompt of n tokens may hit at most
    ⌊(n − 1) / block_size⌋ blocks, the longest run of its leading blocks seen before.

    Worked out from the model, not the tokens (a real trace's prompts run to 10⁹ tokens): the
    prompt's first p tokens, while within its blocks, are named by the chain of the block keys
    they cover and the cut of the last — the same name, the same tokens (``Blocks.prompt``);
    a cache block reaching into a call's new tokens is its own and never hits. ``warm``'s
    calls are seen first and not counted (warm-ups sent before the run)."""
    seen = {name for s in warm for call in s.calls for name in _prefix_names(s, call, s.block_size, block_size)}
    hits = queries = 0
    for s in sessions:
        size = s.block_size
        for call in s.calls:
            names = _prefix_names(s, call, size, block_size)
            most = max(call.input_len - 1, 0) // block_size
            run = 0
            while run < min(most, len(names)) and names[run] in seen:
                run += 1
            hits += run * block_size
            queries += call.input_len
            seen.update(names)
    return hits, queries


def _prefix_names(s: Session, call: Call, size: int, block_size: int) -> list[int]:
    """A name for each cache block of the call's prompt that lies within its trace blocks."""
    covered = min(len(call.blocks) * size, call.input_len)
    chain, names = [0], []  # chain[k]: the name of the first k trace blocks
    for h in call.blocks[: -(-covered // size)]:
        chain.append(hash((chain[-1], s.session_id, call.agent, h, size)))
    for end in range(block_size, covered + 1, block_size):
        k, cut = divmod(end, size)
        names.append(hash((chain[k], s.session_id, call.agent, call.blocks[k], size, cut)) if cut else chain[k])
    return names


def describe(sessions: list[Session] | tuple[Session, ...]) -> dict:
    """Sessions, calls, blocks, waits and fan-out in figures (``data inspect``, the result)."""
    calls = [c for s in sessions for c in s.calls]
    fan = [len([k for k in kids if s.calls[k].agent != s.calls[i].agent])
           for s in sessions for i, kids in enumerate(s.children())]
    agents = {(s.session_id, c.agent) for s in sessions for c in s.calls if c.agent}
    waits = sorted(c.wait_s for c in calls)
    return {"sessions": len(sessions), "calls": len(calls), "sub_agents": len(agents),
            "max_fan_out": max(fan, default=0), "tool_turns": sum(c.tool_result for c in calls),
            "blocks": sum(len({(c.agent, h) for c in s.calls for h in c.blocks}) for s in sessions),
            "block_size": sorted({s.block_size for s in sessions}),
            "input_tokens": sum(c.input_len for c in calls), "output_tokens": sum(c.output_len for c in calls),
            "max_input_len": max((c.input_len for c in calls), default=0),
            "wait_s": {"total": round(sum(waits), 3), "max": round(waits[-1], 3) if waits else 0.0,
                       "median": round(waits[len(waits) // 2], 3) if waits else 0.0}}


def report(figures: dict) -> str:
    """``describe``'s figures (and what made the sessions) as ``data inspect`` prints them."""
    waits = figures["wait_s"]
    made = f"trace {figures['trace']}" if "trace" in figures else f"synthetic, seed {figures['synthetic']['seed']}"
    scaled = f", scaled ×{figures['trace_scale']}" if figures.get("scaled") else ""
    if "max_wait_s" in figures:
        scaled += f", waits capped at {figures['max_wait_s']} s ({figures['waits_capped']} cut)"
    lines = _otel_line(figures.get("otel")) + _locked_line(figures.get("locked"))
    return (f"Agentic sessions ({made}{scaled})\n{lines}"
            f"  sessions {figures['sessions']} · calls {figures['calls']} · sub-agents {figures['sub_agents']} · "
            f"max fan-out {figures['max_fan_out']} · turns fed a tool's result {figures.get('tool_turns', 0)}\n"
            f"  blocks {figures['blocks']} of {'/'.join(map(str, figures['block_size']))} tokens · input tokens "
            f"{figures['input_tokens']} (longest call {figures['max_input_len']}) · output tokens "
            f"{figures['output_tokens']}\n"
            f"  waits (tool / think time): total {waits['total']} s, median {waits['median']} s, "
            f"max {waits['max']} s\n")


def _otel_line(otel: dict | None) -> str:
    if not otel:
        return ""
    return (f"  OpenTelemetry spans {otel['spans']} · tool spans {otel['tool_spans']} ({otel['tool_s']} s) · calls "
            f"with no input count (grown from their previous call) {otel['calls_without_input_tokens']} · calls "
            f"overlapping their agent's call before (sent beside it) {otel['concurrent_calls']}\n")


def _locked_line(locked: dict | None) -> str:
    if not locked:
        return ""
    return (f"  locked (AgentX-style): start points {locked['start_points']}; {locked['warm_up_calls']} warm-up "
            f"turns, {locked['calls_before_start']} calls before the start points left out; cache-bust marker of "
            f"{locked['marker_tokens']} tokens per session\n")
