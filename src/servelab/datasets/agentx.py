"""The AgentX-style locked scenario's sessions (``--agentic-locked``): start points sampled
over the recorded run, the turn before each sent as warm-up, a cache-bust marker per session.

Our reading of SemiAnalysis AgentX as AIPerf documents it
(``docs/benchmark-modes/semianalysis-agentx-faq.md`` of ai-dynamo/aiperf), written here:

- **Start points.** Each session gets a start point t* drawn uniformly over its recorded run
  (0 to its main agent's last send, ``Call.t_s``; from the run's seed, so two runs with one
  seed replay the same trajectories). The main agent's last call sent before t* is the
  **warm-up**: sent before the measured run (its record is not kept), so the session's
  prefix is in the cache when measuring starts. Main-agent calls sent at or after t* are
  measured, with the sub-agents spawned by them or by the warm-up; earlier calls are dropped.
  A measured call whose parents were all dropped or warmed up is a root, sent its recorded
  wait after the start.
- **Cache-bust marker.** Every prompt of a session (its sub-agents' too: the marker is the
  session tree's) starts with ``MARKER_TOKENS`` token ids drawn for that session from a
  nonce drawn per run, never from the seed: two runs, or two sessions of one run, never share
  a cached prefix, while a session's own calls do. The marker replaces the prompt's first
  tokens, so lengths stay exact, and it is shorter than an engine block, so it moves no
  block boundary. The warm-up carries its session's marker.
- **Idle gaps** are capped at ``IDLE_CAP_S``; a run shorter than ``--agentic-min-duration``
  (AgentX's 900 s by default) is invalid (loadgen/agentx.py judges the run).
- **Recycled lanes** (with ``--max-sessions N``, AgentX's ``--concurrency``): a lane whose session
  tree has drained takes the next session, in order — the trace's sessions after the first N,
  then the trace again from its first session, each replayed whole from its first call under
  a new id (``id@2``, ``id@3``…: its own marker) — until ``--agentic-min-duration`` has passed
  since t0; then lanes take no more, and the run ends as the sessions under way end. The
  sessions lanes may take are drawn before t0 (``recycled``): enough that the lanes do not
  run out before the minimum, since no session ends sooner than its longest chain of waits
  (``least_s``) unless a failed call cuts it, and at most ``POOL_CALLS`` calls (a trace with no
  waits, or many lanes over a long minimum: the lanes may then run out, and the verdict says
  the run was short).
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import secrets

import numpy as np

from servelab.spec_checks import AGENTX_IDLE_CAP_S
from servelab.datasets.agentic import Blocks, Call, Session

POOL_CALLS = 50_000  # at most this many calls drawn ahead for recycled lanes (each a request of the run)
IDLE_CAP_S = AGENTX_IDLE_CAP_S  # AgentX's idle-gap cap (config refuses another --trace-max-wait)
MARKER_TOKENS = 8  # < 16, vLLM's smallest usual block: the marker never fills a block by itself


class Marked(Blocks):
    """Blocks whose prompts start with their session's marker."""

    def __init__(self, vocab: list[int], nonce: str | None = None) -> None:
        super().__init__(vocab)
        self.nonce = nonce or secrets.token_hex(8)

    def marker(self, session_id: str) -> list[int]:
        return random.Random(f"{self.nonce}/{session_id}").choices(self.vocab, k=MARKER_TOKENS)

    def prompt(self, session: Session, index: int) -> list[int]:
        ids = super().prompt(session, index)
        mark = self.marker(session.session_id)[:len(ids)]
        return mark + ids[len(mark):]


def start_points(sessions: list[Session], rng: np.random.Generator,
                 lanes: int | None = None) -> tuple[list[Session], list[Session], dict]:
    """(the measured sessions, each session's warm-up calls as a session of their own, what
    was drawn): see the module's docstring. Session ids are kept (a warm-up's blocks and
    marker are its session's). With ``lanes`` (--max-sessions), only the first ``lanes``
    sessions start at a drawn point; the later ones take a lane another left, and replay whole
    with no warm-up, as AgentX's recycled lanes do (its FAQ, §6)."""
    measured, warm, dropped = [], [], 0
    for n, s in enumerate(_unique(sessions)):
        if lanes is not None and n >= lanes:
            measured.append(s)
            continue
        main = [c.t_s or 0.0 for c in s.calls if not c.agent]
        t_star = float(rng.uniform(0.0, max(main, default=0.0)))
        keep, warm_up = _split(s, t_star)
        dropped += len(s.calls) - len(keep) - (warm_up is not None)
        measured.append(_trim(s, keep))
        if warm_up is not None:
            warm.append(Session(s.session_id, s.block_size, (dataclasses.replace(s.calls[warm_up], parents=(),
                                                                                  wait_s=0.0),)))
    points = "uniform over each session's recorded run"
    if lanes is not None and len(measured) > lanes:
        points += f" (the first {lanes}, one per lane; the {len(measured) - lanes} after them replay whole)"
    return measured, warm, {"start_points": points, "warm_up_calls": len(warm), "calls_before_start": dropped}


def _unique(sessions: list[Session]) -> list[Session]:
    """Sessions with distinct ids (``id#2`` for a repeat): the marker is drawn per id."""
    seen: dict[str, int] = {}
    out = []
    for s in sessions:
        n = seen[s.session_id] = seen.get(s.session_id, 0) + 1
        out.append(s if n == 1 else dataclasses.replace(s, session_id=f"{s.session_id}#{n}"))
    return out


def _split(s: Session, t_star: float) -> tuple[list[int], int | None]:
    """The calls measured (in order) and the warm-up call's index (None: the session starts whole)."""
    before = [i for i, c in enumerate(s.calls) if not c.agent and (c.t_s or 0.0) < t_star]
    warm_up = before[-1] if before else None
    keep: list[int] = []
    live = set() if warm_up is None else {warm_up}
    for i, c in enumerate(s.calls):
        if (not c.agent and (warm_up is None or (c.t_s or 0.0) >= t_star)) or (
                c.agent and c.parents and c.parents[0] in live | set(keep)):
            keep.append(i)
    return keep, warm_up


def _trim(s: Session, keep: list[int]) -> Session:
    """The session's kept calls, re-indexed; a parent not kept is dropped (a warm-up has
    completed before the run starts)."""
    place = {old: new for new, old in enumerate(keep)}
    calls: list[Call] = []
    for old in keep:
        c = s.calls[old]
        calls.append(dataclasses.replace(c, parents=tuple(place[p] for p in c.parents if p in place)))
    return Session(s.session_id, s.block_size, tuple(calls))


def least_s(s: Session) -> float:
    """The shortest time a session can take: its longest chain of waits (a call is sent its wait
    after its last parent completed, and no answer takes less than no time)."""
    done = [0.0] * len(s.calls)
    for i, c in enumerate(s.calls):  # parents come first in a session (a later one reads 0: still a bound)
        done[i] = max((done[p] for p in c.parents if p < i), default=0.0) + c.wait_s
    return max(done, default=0.0)


def recycled(corpus: list[Session], measured: list[Session], lanes: int,
             min_duration_s: float) -> tuple[list[Session], dict]:
    """The sessions recycled lanes take after ``measured`` (see the module's docstring): the
    corpus again, whole, in order, until their least times and the measured sessions' cover
    every lane for the minimum and one session more, or ``POOL_CALLS`` calls are drawn."""
    corpus = _unique(corpus)  # a trace's repeated id: its copies need ids (and markers) of their own too
    least = [least_s(s) for s in corpus]
    need = lanes * (min_duration_s + max(least, default=0.0))
    have, calls = sum(least_s(s) for s in measured), sum(len(s.calls) for s in measured)
    pool = _pool(corpus, least, need - have, POOL_CALLS - calls)
    have += sum(t for _, t in pool)
    return [s for s, _ in pool], {"recycled": {
        "sessions_drawn_ahead": len(pool), "calls_drawn_ahead": sum(len(s.calls) for s, _ in pool),
        "lanes_covered": have >= need, "until_s": min_duration_s}}


def _pool(corpus: list[Session], least: list[float], need_s: float, room: int) -> list[tuple[Session, float]]:
    """Whole copies of the corpus, round after round, with their least times, until they add up
    to ``need_s`` or the next would pass ``room`` calls."""
    pool: list[tuple[Session, float]] = []
    for rounds in itertools.count(2):
        for s, t in zip(corpus, least):
            if need_s <= 0 or len(s.calls) > room:
                return pool
            pool.append((dataclasses.replace(s, session_id=f"{s.session_id}@{rounds}"), t))
            need_s, room = need_s - t, room - len(s.calls)
        if not corpus:
            return pool
