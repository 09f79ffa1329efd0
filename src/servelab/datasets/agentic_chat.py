"""Agentic sessions as chat messages (layer 1): what a call sends to /v1/chat/completions.

Tools need chat requests, and chat requests carry text, not token ids: the server renders
the messages with its chat template and re-tokenizes them. So a call's prompt ids
(datasets/agentic.Blocks) are decoded, with one change first, AIPerf's rule: the first token
of every ``block_size`` run (each block, and each block-sized stretch of new tokens) is the
tokenizer's separator (its BOS, else its EOS), so no two blocks merge into one token when
the server re-tokenizes; a block keeps its length. What the server counts still drifts
from what the trace meant (the template's own tokens, decoded text re-tokenized another
way, the real assistant messages): the run reports it against ``usage.prompt_tokens``.

A call's messages are its agent's conversation so far. Its *chain* is the calls of its agent
before it, each the one its successor follows (``chain``). The first message is the user's:
the first call's input. After each earlier call comes its reply (``Reply``: the server's
own tool call or text, or the tool call the trace scripted), then the new input up to the
next call: a ``role: "tool"`` message answering the call by its ``tool_call_id`` when the
reply was a tool call, else the user's next message. A call's input counts the earlier
replies (the trace's ``out``), so that new input starts after them: the tool result is
``input_len(next) − input_len(call) − output_len(call)`` tokens, taken from the next call's
own ids (so what two calls share is the same text).
"""

from __future__ import annotations

import json

from servelab.datasets.agentic import Session

# The tool every chat session's requests carry (OpenAI's format): one small function, as a
# coding agent's file read; a scripted tool call (the trace says one was made, the server
# answered text) calls it with DEFAULT_ARGUMENTS
TOOLS = ({"type": "function", "function": {
    "name": "read_file", "description": "Read a file of the repository and return its text.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string", "description": "the file's path"}},
                   "required": ["path"]}}},)
DEFAULT_ARGUMENTS = json.dumps({"path": "src/main.py"})


def separated(ids: list[int], block_size: int, separator: int | None) -> list[int]:
    """``ids`` with the first token of each ``block_size`` run replaced by ``separator``."""
    if separator is None:
        return ids
    out = list(ids)
    out[::block_size] = [separator] * len(out[::block_size])
    return out


def chain(session: Session, k: int) -> list[int]:
    """The calls of call ``k``'s agent it follows, first to last: each one's successor lists it
    as a parent, of the same agent. Cut where a context shrank (a trace's compaction): the
    history was rewritten there, so the call starts a conversation of its own."""
    calls, out, at = session.calls, [], k
    while True:
        same = [p for p in calls[at].parents if calls[p].agent == calls[at].agent]
        if not same or calls[same[-1]].input_len > calls[at].input_len:
            return out[::-1]
        at = same[-1]
        out.append(at)


def scripted(session: Session) -> list[bool]:
    """Per call: the trace says its reply is a tool call (its agent's next call is a tool turn)."""
    out = [False] * len(session.calls)
    for k, call in enumerate(session.calls):
        if call.tool_result and (before := chain(session, k)):
            out[before[-1]] = True
    return out


def reply(answer: str, calls: tuple[dict, ...], scripted_id: str | None) -> tuple[dict, str | None]:
    """The assistant message a later call carries for a reply, and where its tool call came
    from: ``"server"`` (its own; arguments that do not parse, cut at max_tokens, become
    DEFAULT_ARGUMENTS), ``"script"`` (the trace's, with ``scripted_id``: the server answered
    text) or None (text, no tool call)."""
    message: dict = {"role": "assistant", "content": answer or None}
    if calls:
        message["tool_calls"] = [{"id": c["id"] or f"{scripted_id}-{j}", "type": "function", "function": {
            "name": c["function"]["name"] or TOOLS[0]["function"]["name"],
            "arguments": _parsed(c["function"]["arguments"])}} for j, c in enumerate(calls)]
        return message, "server"
    if scripted_id is not None:
        message["tool_calls"] = [{"id": scripted_id, "type": "function", "function": {
            "name": TOOLS[0]["function"]["name"], "arguments": DEFAULT_ARGUMENTS}}]
        return message, "script"
    message["content"] = answer
    return message, None


def _parsed(arguments: str) -> str:
    try:
        json.loads(arguments)
        return arguments
    except ValueError:
        return DEFAULT_ARGUMENTS


def messages(session: Session, k: int, ids: list[int], replies: dict[int, dict], decode) -> list[dict]:
    """Call ``k``'s messages (the module's docstring): ``ids`` its separated prompt ids,
    ``replies`` the assistant message of each earlier call of its chain, ``decode`` ids → text."""
    calls = session.calls
    before = chain(session, k)
    first = calls[before[0]].input_len if before else calls[k].input_len
    out = [{"role": "user", "content": decode(ids[:first])}]
    for i, a in enumerate(before):
        said = replies[a]
        nxt = calls[before[i + 1]].input_len if i + 1 < len(before) else calls[k].input_len
        lo = min(calls[a].input_len + calls[a].output_len, nxt)
        out.append(said)
        tools = said.get("tool_calls") or []
        if not tools:
            out.append({"role": "user", "content": decode(ids[lo:nxt])})
        for j, call in enumerate(tools):  # one result per call, the stated length shared between them
            part = (lo + (nxt - lo) * j // len(tools), lo + (nxt - lo) * (j + 1) // len(tools))
            out.append({"role": "tool", "tool_call_id": call["id"], "content": decode(ids[part[0]:part[1]])})
    return out


def tool_result_len(session: Session, k: int) -> int:
    """The stated length of the tool result call ``k`` carries (0: it follows no call)."""
    before = chain(session, k)
    if not before:
        return 0
    a = session.calls[before[-1]]
    return max(session.calls[k].input_len - a.input_len - a.output_len, 0)
