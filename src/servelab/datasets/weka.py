"""WEKA agentic coding traces (``docs/TRACE_FORMAT.md`` of callanjfox/agentic-coding-analysis,
the format AIPerf, GuideLLM and inference-perf read) as agentic sessions (datasets/agentic.py).

A file holds one conversation per line (JSON Lines), or one JSON object (or a list of them)
for the whole file. A conversation::

    {"id": "a1", "block_size": 64, "tool_tokens": 0, "system_tokens": 0, "requests": [
      {"t": 0.0, "type": "s", "in": 150, "out": 20, "hash_ids": [1, 2], "think_time": 0.0},
      {"t": 4.0, "type": "subagent", "agent_id": "x1", "status": "completed", "requests": [...]},
      {"t": 9.0, "type": "n", "in": 260, "out": 10, "hash_ids": [1, 2, 3, 4], "think_time": 1.5}]}

Read as AIPerf reads it: request k+1 follows request k; a sub-agent entry starts when the
parent's request before it completes, and the parent's next request waits for every
sub-agent spawned since its previous one; a sub-agent with no next parent request runs in
the background. A call is sent ``think_time`` seconds (the trace's "gap since previous
response completed"; 0 where absent) after what it waits for. Hash ids cover full blocks
(⌊in / block_size⌋; ⌈in / block_size⌉ is accepted, the last one partial); the rest of
``in`` is new tokens. A sub-agent's ids are its own scope (its cache context is fresh).
A request is a tool turn (``Call.tool_result``) when its ``input_types`` hold ``tool_result``
or its agent's request before it stopped with ``stop: tool_use``.

Bad input is one line naming the file, the line and the field.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from servelab.datasets.agentic import Call, Session
from servelab.datasets.files import jsonl_rows
from servelab.errors import DatasetError

REQUEST_TYPES = ("s", "n", "subagent")


def read_weka(path: str) -> list[Session]:
    """Every conversation of the trace at ``path``, in file order."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise DatasetError(f"{path}: cannot read the trace ({e.strerror or e})") from None
    sessions = [_conversation(f"{path}:{line}", row, line) for line, row in _rows(path, text)]
    if not sessions:
        raise DatasetError(f"{path}: no conversation (the file is empty)")
    return sessions


def _rows(path: str, text: str) -> list[tuple[int, object]]:
    """(line number, JSON value) of each conversation: the whole file when it is one JSON value."""
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict):
        return [(1, whole)]
    if isinstance(whole, list):
        return [(1, row) for row in whole]
    return jsonl_rows(path, text)


def _conversation(where: str, row: object, line: int) -> Session:
    if not isinstance(row, dict):
        raise DatasetError(f"{where}: each conversation must be a JSON object")
    size = row.get("block_size")
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise DatasetError(f"{where}: field 'block_size' must be an integer >= 1, not {size!r}")
    calls: list[Call] = []
    _agent(where, row, "requests", "", None, size, calls)
    return Session(str(row.get("id", f"line{line}")), size, tuple(calls))


def _agent(where: str, row: dict, field: str, agent: str, spawned_by: int | None, size: int,
           calls: list[Call]) -> int | None:
    """Append one agent's calls (its sub-agents' too) to ``calls``; its last call's index."""
    requests = row.get("requests")
    if not isinstance(requests, list) or not requests:
        raise DatasetError(f"{where}: field '{field}' must be a non-empty list of requests")
    prev, joining, tool_use = spawned_by, [], False
    for j, req in enumerate(requests):
        name = f"{field}[{j}]"
        if not isinstance(req, dict):
            raise DatasetError(f"{where}: {name} must be a JSON object")
        kind = req.get("type", "s")
        if kind not in REQUEST_TYPES:
            raise DatasetError(f"{where}: {name}.type is {kind!r}, not one of {', '.join(REQUEST_TYPES)}")
        t = _time(where, req, name, "t")
        if kind == "subagent":
            if prev is None:
                raise DatasetError(f"{where}: {name} is a sub-agent with no parent (no request of its agent "
                                   f"before it)")
            child = str(req.get("agent_id") or f"{agent}{name}")
            joining.append(_agent(where, req, f"{name}.requests", child, prev, size, calls))
            continue
        parents = tuple(p for p in (prev, *joining) if p is not None)
        n = _count(where, req, name, "in")
        calls.append(Call(agent, _hash_ids(where, req, name, size, n), n, _count(where, req, name, "out"), parents,
                          _time(where, req, name, "think_time"), t_s=t, tool_result=tool_use or _tool_result(req)))
        prev, joining, tool_use = len(calls) - 1, [], req.get("stop") == "tool_use"
    return prev


def _tool_result(req: dict) -> bool:
    """The request's input is a tool's result (``input_types``: ``tool_result``)."""
    kinds = req.get("input_types")
    return isinstance(kinds, list) and "tool_result" in kinds


def _count(where: str, req: dict, name: str, key: str) -> int:
    value = req.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise DatasetError(f"{where}: {name}.{key} must be an integer >= 0, not {value!r}")
    return value


def _time(where: str, req: dict, name: str, key: str) -> float:
    """A time in seconds (0 where absent); a negative one is an error."""
    value = req.get(key, 0.0)
    if value is None:
        return 0.0
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise DatasetError(f"{where}: {name}.{key} must be a number of seconds, not {value!r}")
    if value < 0:
        raise DatasetError(f"{where}: {name}.{key} is negative ({value} s)")
    return float(value)


def _hash_ids(where: str, req: dict, name: str, size: int, n: int) -> tuple[int, ...]:
    ids = req.get("hash_ids", [])
    if not isinstance(ids, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in ids):
        raise DatasetError(f"{where}: {name}.hash_ids must be a list of integers")
    most = -(-n // size)
    if len(ids) > most:
        raise DatasetError(f"{where}: {name}.hash_ids has {len(ids)} ids, more than ⌈in / block_size⌉ = "
                           f"⌈{n} / {size}⌉ = {most}")
    return tuple(ids)
