"""Synthetic agentic sessions (no trace needed): the same model as a WEKA trace gives
(datasets/agentic.py), drawn from stated distributions, every draw from one seeded
``numpy.random.Generator`` — so a study or a sweep can vary how agentic the load is.

A session: the main agent's ``turns`` calls (uniform integer in the range). Its context
starts at ``system_tokens`` and grows after each call by the call's output and a tool result
(lognormal, median ``tool_result_tokens``, shape ``tool_result_sigma``); each call resends
the whole context (its full blocks shared with the call before, the tail new). Outputs are
lognormal (median ``output_tokens``, shape ``output_sigma``); the wait before each call after
the first is the tool's run time, exponential with mean ``tool_wait_s`` (each such call is a
tool turn: ``Call.tool_result``). After a call that is
not the last, with probability ``fan_out_p``, ``fan_out`` sub-agents (uniform integer in the
range) start, each its own scope (a fresh cache context, as WEKA's): ``sub_turns`` calls
growing the same way from ``sub_system_tokens``; the main agent's next call waits for all.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from servelab.datasets.agentic import Call, Session
from servelab.errors import DatasetError


@dataclass(frozen=True, slots=True)
class Shape:
    turns: tuple[int, int] = (3, 8)
    system_tokens: int = 256
    tool_result_tokens: float = 96.0
    tool_result_sigma: float = 0.6
    output_tokens: float = 48.0
    output_sigma: float = 0.5
    tool_wait_s: float = 0.5
    fan_out_p: float = 0.25
    fan_out: tuple[int, int] = (1, 3)
    sub_turns: tuple[int, int] = (1, 3)
    sub_system_tokens: int = 128
    block_size: int = 64

    def __post_init__(self) -> None:
        for name in ("turns", "fan_out", "sub_turns"):
            low, high = getattr(self, name)
            if not 1 <= low <= high:
                raise DatasetError(f"agentic shape: {name} must be a range 1 <= low <= high, not {low}..{high}")
        if not 0 <= self.fan_out_p <= 1:
            raise DatasetError(f"agentic shape: fan_out_p must be within 0..1, not {self.fan_out_p}")
        if self.block_size < 1 or min(self.system_tokens, self.sub_system_tokens) < 0 or self.tool_wait_s < 0:
            raise DatasetError("agentic shape: block_size must be >= 1, token counts and tool_wait_s >= 0")


RANGES = ("turns", "fan_out", "sub_turns")


def shape_from(pairs: tuple[tuple[str, str], ...], flag: str = "--agentic-shape") -> Shape:
    """A Shape with ``pairs`` (``--agentic-shape turns=2:5 fan_out_p=0.5``) over the defaults:
    a range is ``LO:HI`` (or one N), a count an integer, the rest numbers; a bad one is one line."""
    fields = {name: getattr(Shape(), name) for name in Shape.__slots__}
    values = {}
    for key, text in pairs:
        if key not in fields:
            raise DatasetError(f"{flag}: unknown key {key!r} (keys: {', '.join(fields)})")
        try:
            if key in RANGES:
                low, _, high = text.partition(":")
                values[key] = (int(low), int(high or low))
            else:
                values[key] = type(fields[key])(text)
        except ValueError:
            kind = "a range LO:HI" if key in RANGES else f"a{'n integer' if isinstance(fields[key], int) else ' number'}"
            raise DatasetError(f"{flag}: {key}={text!r} is not {kind}") from None
    return Shape(**{**fields, **values})


def synthesize(n: int, shape: Shape, rng: np.random.Generator) -> list[Session]:
    """``n`` sessions drawn from ``shape`` with ``rng``."""
    return [_session(f"syn{i}", shape, rng) for i in range(n)]


class _Agent:
    """One agent's growing context: its block ids so far and its length in tokens."""

    def __init__(self, name: str, tokens: int, size: int) -> None:
        self.name, self.tokens, self.size, self.ids, self.calls = name, tokens, size, [], 0

    def call(self, output: int, parents: tuple[int, ...], wait_s: float) -> Call:
        """A call on the context so far: after the agent's first, its new input is a tool's result."""
        while len(self.ids) < self.tokens // self.size:  # a block once full keeps its id
            self.ids.append(len(self.ids) + 1)
        self.calls += 1
        return Call(self.name, tuple(self.ids), self.tokens, output, parents, wait_s, tool_result=self.calls > 1)


def _session(sid: str, shape: Shape, rng: np.random.Generator) -> Session:
    calls: list[Call] = []
    main = _Agent("", shape.system_tokens + _lognormal(rng, shape.tool_result_tokens, shape.tool_result_sigma),
                  shape.block_size)
    turns = int(rng.integers(shape.turns[0], shape.turns[1] + 1))
    parents: tuple[int, ...] = ()
    for k in range(turns):
        wait = float(rng.exponential(shape.tool_wait_s)) if k else 0.0
        output = _lognormal(rng, shape.output_tokens, shape.output_sigma, least=1)
        calls.append(main.call(output, parents, wait))
        me = len(calls) - 1
        main.tokens += output + _lognormal(rng, shape.tool_result_tokens, shape.tool_result_sigma)
        joins = _fan_out(k, me, shape, rng, calls) if k < turns - 1 and rng.random() < shape.fan_out_p else []
        parents = (me, *joins)
    return Session(sid, shape.block_size, tuple(calls))


def _fan_out(k: int, spawner: int, shape: Shape, rng: np.random.Generator, calls: list[Call]) -> list[int]:
    """Sub-agents started by call ``spawner``: their last calls, for the join."""
    lasts = []
    for m in range(int(rng.integers(shape.fan_out[0], shape.fan_out[1] + 1))):
        sub = _Agent(f"t{k}.{m}", shape.sub_system_tokens + _lognormal(rng, shape.tool_result_tokens,
                                                                        shape.tool_result_sigma), shape.block_size)
        parent = spawner
        for j in range(int(rng.integers(shape.sub_turns[0], shape.sub_turns[1] + 1))):
            wait = float(rng.exponential(shape.tool_wait_s)) if j else 0.0
            output = _lognormal(rng, shape.output_tokens, shape.output_sigma, least=1)
            calls.append(sub.call(output, (parent,), wait))
            parent = len(calls) - 1
            sub.tokens += output + _lognormal(rng, shape.tool_result_tokens, shape.tool_result_sigma)
        lasts.append(parent)
    return lasts


def _lognormal(rng: np.random.Generator, median: float, sigma: float, least: int = 0) -> int:
    return max(least, round(median * float(np.exp(sigma * rng.standard_normal()))))
