"""An agent's own traffic from its OpenTelemetry GenAI spans, as agentic sessions
(datasets/agentic.py).

The file is OTLP JSON as the OpenTelemetry Collector's file exporter writes it: one
``{"resourceSpans": [{"scopeSpans": [{"spans": [...]}]}]}`` object per line (a line of
metrics or logs is skipped; one object for the whole file is read too). A span has
``traceId``, ``spanId``, ``parentSpanId``, ``startTimeUnixNano``, ``endTimeUnixNano`` (OTLP
JSON writes 64-bit integers as strings) and ``attributes``, a list of
``{"key": ..., "value": {"stringValue" | "intValue" | "doubleValue" | ...: ...}}``.

Read by the GenAI semantic conventions (``gen_ai.operation.name``):

- ``chat`` / ``text_completion`` / ``generate_content``: a model call, with
  ``gen_ai.usage.input_tokens`` and ``gen_ai.usage.output_tokens`` (the output falls back
  to ``gen_ai.request.max_tokens``); an LLM span inside another is the same call,
  instrumented twice (the outer one is kept);
- ``invoke_agent``: an agent. The outermost is the session's main agent; one nested in it is
  a sub-agent (its calls in their own block scope, named ``gen_ai.agent.name`` or ``.id``),
  spawned by its parent agent's call before it and joined by the parent's next call, when
  it had ended before that call started (else it ran in the background; a later call joins it);
- ``execute_tool``: a tool's run time, inside the recorded gap between calls;
- any other span (HTTP, a framework's own): a container, looked through.

One session is a ``gen_ai.conversation.id`` (the traces that carry it: a chat's turns), else
one trace. An agent's calls, in start order, make steps: a call that starts after every call
of its agent's step before it had ended begins the next step and waits for all of them; a
call that starts while one of them still runs (its span overlaps: a framework firing model
calls at once) joins that step, sent beside its calls: it waits for what they wait for, not
for them. Either also waits for its agent's sub-agents that had ended before it started.
Without overlap every step is one call, each waiting for the one before. Each call is sent
``wait_s`` after the last of what it waits for completed, the recorded end-to-start gap
(the tool's run, the user's think time; AgentX's rule: delays from the previous
completion). A sub-agent is spawned by the call of its parent's step that ended last before
it started (none ended: its parent's call before it).

Spans carry token counts, not content, so a call's prompt is the prompt it continues, then
that call's output, then new tokens (the tool result, the next user turn): the blocks of
that prompt, then new blocks (``BLOCK_SIZE`` tokens, the last one short, so the next call
can share it whole). A call continues the call of the step before it that ended last (its
latest context, listed last among its agent's parents; with no overlap, its agent's
previous call); calls of one step continue the same one, never each other (a call sent
beside another has not seen its output). A call with no input count grows from the call it
continues by its output alone; one with fewer input tokens than that call's prompt had its
context rewritten (compacted) and shares nothing. An agent's first step is all new.

Bad input is one line naming the file, the line and the field.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field

from servelab.datasets.agentic import Call, Session
from servelab.datasets.files import jsonl_rows, read_text
from servelab.errors import DatasetError

BLOCK_SIZE = 64  # tokens per block id made here (the WEKA traces' size, so --trace-scale reads the same)
LLM_OPERATIONS = ("chat", "text_completion", "generate_content")
OPERATION = "gen_ai.operation.name"
INPUT_TOKENS, OUTPUT_TOKENS, MAX_TOKENS = "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", \
    "gen_ai.request.max_tokens"
CONVERSATION = "gen_ai.conversation.id"
AGENT_NAMES = ("gen_ai.agent.name", "gen_ai.agent.id")
_VALUE_KEYS = ("stringValue", "intValue", "doubleValue", "boolValue")
_OTHER_SIGNALS = ("resourceMetrics", "resourceLogs")


@dataclass(slots=True)
class Span:
    where: str  # "<file>:<line>: resourceSpans[i].scopeSpans[j].spans[k]" for errors
    trace: str
    span: str
    parent: str
    start: int
    end: int
    attrs: dict
    op: str = ""
    kids: list[Span] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class OtelTrace:
    sessions: list[Session]
    about: dict  # spans read, tool spans and their time, calls whose input count was missing


def read_otel(path: str) -> OtelTrace:
    """Every session of the span export at ``path``, in order of their first span."""
    spans = _spans(path, read_text(path))
    groups: dict[str, list[Span]] = defaultdict(list)
    for key, trace_spans in _by_trace(spans).items():
        groups[key] += trace_spans
    if not groups:
        raise DatasetError(f"{path}: no span (the file has no resourceSpans)")
    made = _Made()
    sessions = [_session(key, group, made) for key, group in sorted(groups.items(), key=lambda kv: min(
        s.start for s in kv[1]))]
    if not any(s.calls for s in sessions):
        raise DatasetError(f"{path}: no model call (no span has {OPERATION} one of {', '.join(LLM_OPERATIONS)})")
    tools = [s for s in spans if s.op == "execute_tool"]
    return OtelTrace([s for s in sessions if s.calls], {
        "spans": len(spans), "tool_spans": len(tools), "tool_s": round(sum(s.end - s.start for s in tools) / 1e9, 3),
        "calls_without_input_tokens": made.grown, "concurrent_calls": made.concurrent})


def looks_like_otel(path: str) -> bool:
    """The file's first non-blank line is an OTLP export (``data inspect``'s and weka's check)."""
    try:
        with open(path, encoding="utf-8") as f:
            first = next((line for line in f if line.strip()), "")
    except (OSError, UnicodeDecodeError):
        return False
    return any(f'"{k}"' in first[:4096] for k in ("resourceSpans", *_OTHER_SIGNALS))


# -- the file ---------------------------------------------------------------------------


def _spans(path: str, text: str) -> list[Span]:
    try:
        rows = [(1, json.loads(text))]
    except json.JSONDecodeError:
        rows = jsonl_rows(path, text)
    spans: list[Span] = []
    for number, row in rows:
        spans += _export(f"{path}:{number}", row)
    seen: set[tuple[str, str]] = set()
    for s in spans:
        if (s.trace, s.span) in seen:
            raise DatasetError(f"{s.where}.spanId {s.span!r} appears twice in trace {s.trace!r}")
        seen.add((s.trace, s.span))
    return spans


def _export(where: str, row: object) -> list[Span]:
    if not isinstance(row, dict):
        raise DatasetError(f"{where}: each line must be a JSON object (an OTLP export)")
    if "resourceSpans" not in row and any(k in row for k in _OTHER_SIGNALS):
        return []  # the exporter writes every signal to one file: metrics and logs are not ours
    out = []
    for i, resource in enumerate(_list(where, row, "resourceSpans", "resourceSpans")):
        for j, scope in enumerate(_list(where, resource, "scopeSpans", f"resourceSpans[{i}].scopeSpans")):
            for k, span in enumerate(_list(where, scope, "spans", f"resourceSpans[{i}].scopeSpans[{j}].spans")):
                out.append(_span(f"{where}: resourceSpans[{i}].scopeSpans[{j}].spans[{k}]", span))
    return out


def _list(where: str, obj: object, key: str, name: str) -> list:
    value = obj.get(key, []) if isinstance(obj, dict) else None
    if not isinstance(value, list):
        raise DatasetError(f"{where}: {name} must be a list")
    return value


def _span(where: str, raw: object) -> Span:
    if not isinstance(raw, dict):
        raise DatasetError(f"{where} must be a JSON object")
    ids = []
    for key in ("traceId", "spanId"):
        value = raw.get(key)
        if not isinstance(value, str) or not value:
            raise DatasetError(f"{where}.{key} must be a non-empty string, not {value!r}")
        ids.append(value)
    start, end = _nanos(where, raw, "startTimeUnixNano"), _nanos(where, raw, "endTimeUnixNano")
    if end < start:
        raise DatasetError(f"{where}.endTimeUnixNano is before its startTimeUnixNano ({end} < {start})")
    attrs = _attributes(where, raw.get("attributes", []))
    op = attrs.get(OPERATION, "")
    return Span(where, ids[0], ids[1], str(raw.get("parentSpanId") or ""), start, end, attrs,
                op if isinstance(op, str) else "")


def _nanos(where: str, raw: dict, key: str) -> int:
    value = raw.get(key)
    try:
        n = int(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else None
    except ValueError:
        n = None
    if n is None or n < 0:
        raise DatasetError(f"{where}.{key} must be an integer of nanoseconds >= 0, not {value!r}")
    return n


def _attributes(where: str, raw: object) -> dict:
    if not isinstance(raw, list):
        raise DatasetError(f"{where}.attributes must be a list of {{key, value}}")
    out = {}
    for a, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("key"), str) or not isinstance(
                item.get("value", {}), dict):
            raise DatasetError(f"{where}.attributes[{a}] must be {{\"key\": ..., \"value\": {{...}}}}")
        value = item.get("value", {})
        kind = next((k for k in _VALUE_KEYS if k in value), None)
        out[item["key"]] = value[kind] if kind else None
    return out


# -- sessions ---------------------------------------------------------------------------


def _by_trace(spans: list[Span]) -> dict[str, list[Span]]:
    """Spans by session key: the trace's conversation id, else its trace id."""
    traces: dict[str, list[Span]] = defaultdict(list)
    for s in spans:
        traces[s.trace].append(s)
    out: dict[str, list[Span]] = {}
    for trace, group in traces.items():
        conversation = next((str(s.attrs[CONVERSATION]) for s in group if s.attrs.get(CONVERSATION)), trace)
        out.setdefault(conversation, []).extend(group)
    return out


@dataclass(slots=True)
class _Made:
    grown: int = 0  # calls whose input count was missing (grown from their previous call)
    concurrent: int = 0  # calls whose span overlapped their agent's calls before: sent beside them


@dataclass(slots=True)
class _Agent:
    """One agent's work in time order: its model calls and its direct sub-agents."""

    scope: str  # its block scope: "" for the main agent
    items: list[tuple[int, str, Span]] = field(default_factory=list)  # (start, "call" | "agent", span)


@dataclass(slots=True)
class _Step:
    """An agent's latest step: its calls sent side by side (one, unless their spans overlapped)."""

    after: tuple[int, ...]  # what each of them waits for
    base: int | None  # the call their prompts grow from (None: all new)
    calls: list[int] = field(default_factory=list)


class _Builder:
    """Calls of one session, agent by agent, as weka.py reads a conversation."""

    def __init__(self, spans: list[Span], made: _Made) -> None:
        self.t0 = min(s.start for s in spans)
        self.calls: list[Call] = []
        self.ends: list[int] = []  # each call's recorded end
        self.blocks: dict[int, tuple[int, ...]] = {}
        self.next_id: dict[str, int] = defaultdict(lambda: 1)
        self.agents: dict[str | None, _Agent] = {None: _Agent("")}
        self.made = made

    def agent(self, span: Span, scopes: dict) -> _Agent:
        if span.span not in self.agents:
            label = next((str(span.attrs[k]) for k in AGENT_NAMES if span.attrs.get(k)), span.span)
            scopes[label] += 1
            self.agents[span.span] = _Agent(label if scopes[label] == 1 else f"{label}#{scopes[label]}")
        return self.agents[span.span]

    def emit(self, key: str | None, spawned_by: int | None) -> tuple[int, ...]:
        """Append the agent's calls (its sub-agents' too); the calls of its last step."""
        step, last, pending = _Step(_unique((spawned_by,)), None), spawned_by, []
        for start, kind, span in sorted(self.agents[key].items, key=lambda item: item[0]):
            if kind == "agent":
                pending.append((self.emit(span.span, self._spawner(step, start, last)), span.end))
                continue
            joined = tuple(c for calls, end in pending if end <= start for c in calls)
            pending = [(calls, end) for calls, end in pending if end > start]
            step = self._step(step, start, joined)
            after = max((self.ends[p] for p in step.after), default=self.t0)
            self._call(self.agents[key].scope, span, step.base, step.after, max(0, start - after) / 1e9)
            last = len(self.calls) - 1
            step.calls.append(last)
        return tuple(step.calls) or step.after

    def _step(self, step: _Step, start: int, joined: tuple[int, ...]) -> _Step:
        """The step of a call starting at ``start``, the sub-agents that had ended by then ``joined``."""
        if step.calls and start < max(self.ends[c] for c in step.calls):  # beside the step's calls
            step.after = _unique(step.after + joined)
            self.made.concurrent += 1
            return step
        # after every call of the step: it waits for them all and continues the one that ended
        # last, the last of its agent's parents (a chat replay's history follows it: agentic_chat.chain)
        base = self._latest(step.calls, step.base)
        waits = [c for c in step.calls if c != base] + [base] if step.calls else list(step.after)
        return _Step(_unique((*waits, *joined)), base)

    def _latest(self, calls: list[int], otherwise: int | None) -> int | None:
        """The call of ``calls`` that ended last (the later one of a tie), else ``otherwise``."""
        return max(calls, key=lambda c: (self.ends[c], c)) if calls else otherwise

    def _spawner(self, step: _Step, start: int, last: int | None) -> int | None:
        """The call that spawned a sub-agent starting at ``start``: the step's call that ended
        last before it, else the agent's last call (the spawning agent's first call: none)."""
        return self._latest([c for c in step.calls if self.ends[c] <= start], last)

    def _call(self, scope: str, span: Span, own: int | None, parents: tuple[int, ...], wait_s: float) -> None:
        n = _count(span, INPUT_TOKENS)
        out = _count(span, OUTPUT_TOKENS)
        out = out if out is not None else _count(span, MAX_TOKENS)
        if out is None:
            raise DatasetError(f"{span.where}.attributes has no {OUTPUT_TOKENS} (nor {MAX_TOKENS}): the call's "
                               f"output length")
        before = self.calls[own] if own is not None else None
        if n is None:
            if before is None:
                raise DatasetError(f"{span.where}.attributes has no {INPUT_TOKENS}, and no earlier call of its "
                                   f"agent to grow from")
            n, self.made.grown = before.input_len + before.output_len, self.made.grown + 1
        kept = self.blocks[own] if before is not None and n >= before.input_len else ()
        fresh = max(0, -(-n // BLOCK_SIZE) - len(kept))
        ids = kept + tuple(range(self.next_id[scope], self.next_id[scope] + fresh))
        self.next_id[scope] += fresh
        self.blocks[len(self.calls)] = ids
        self.calls.append(Call(scope, ids, n, out, parents, round(wait_s, 6), t_s=(span.start - self.t0) / 1e9))
        self.ends.append(span.end)


def _session(key: str, spans: list[Span], made: _Made) -> Session:
    by_id = {s.span: s for s in spans}
    for s in spans:
        if s.parent in by_id:
            by_id[s.parent].kids.append(s)
    build = _Builder(spans, made)
    scopes: dict[str, int] = defaultdict(int)
    roots = sorted((s for s in spans if s.parent not in by_id), key=lambda s: s.start)
    # (span, its agent's key, inside an invoke_agent span, inside an LLM span)
    stack = [(root, None, False, False) for root in reversed(roots)]
    while stack:
        span, agent, inside, in_llm = stack.pop()
        if span.op in LLM_OPERATIONS and not in_llm:
            build.agents[agent].items.append((span.start, "call", span))
        elif span.op == "invoke_agent" and not in_llm:
            if inside:  # a sub-agent of the agent it sits in; the outermost is the main agent
                build.agent(span, scopes)
                build.agents[agent].items.append((span.start, "agent", span))
                agent = span.span
            inside = True
        stack += [(kid, agent, inside, in_llm or span.op in LLM_OPERATIONS) for kid in reversed(span.kids)]
    build.emit(None, None)
    return Session(key, BLOCK_SIZE, tuple(build.calls))


def _unique(ids: tuple) -> tuple[int, ...]:
    """``ids`` without None and repeats, in order."""
    return tuple(dict.fromkeys(i for i in ids if i is not None))


def _count(span: Span, key: str) -> int | None:
    """A token count (None where absent); OTLP JSON writes intValue as a string."""
    value = span.attrs.get(key)
    if value is None:
        return None
    n = None
    if isinstance(value, float):
        n = int(value) if value.is_integer() else None
    elif isinstance(value, (int, str)) and not isinstance(value, bool):
        try:
            n = int(value)
        except ValueError:
            pass
    if n is None or n < 0:
        raise DatasetError(f"{span.where}.attributes {key} must be an integer >= 0, not {value!r}")
    return n
