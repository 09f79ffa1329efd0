"""The OpenAI dialect: what to send, and what the streamed events mean.

Request bodies follow ``vllm bench serve`` (same fields, so the server does the
same work). Interpretation happens after the run, from stamped events:

* token-bearing event — completions: an event whose ``choices`` is non-empty
  (vLLM's rule; text may be empty for special tokens). Chat: a delta with
  ``content`` or reasoning text, or a ``tool_calls`` delta (a tool call's name or
  argument fragment is output too); the first role-only delta vLLM sends carries no
  output and is NOT counted (vLLM's own client counts it, which shortens TTFT).
* output tokens — ``usage.completion_tokens`` when the server sends it (we ask
  with ``stream_options.include_usage``), else the tokenizer over the text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from servelab.client.sse import Event

# --backend -> API kind, as in vLLM's ASYNC_REQUEST_FUNCS
BACKENDS = {"vllm": "completions", "openai": "completions", "openai-chat": "chat"}
DEFAULT_ENDPOINTS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
TOKEN_EVENT_RULES = {
    "completions": "event with non-empty choices",
    "chat": "delta with content, reasoning or tool_calls (role-only delta excluded)",
}


def request_body(kind: str, model: str, prompt: str, max_tokens: int | None,
                 ignore_eos: bool, extra: dict | None = None, logprobs: int | None = None) -> bytes:
    """JSON body for one streamed request, built before the clock starts.

    As vLLM's client: chat content is a list of parts (``[{"type": "text", ...}]``, the
    form a multimodal message takes too); completions always carry ``logprobs`` (null
    unless asked) and ``repetition_penalty`` 1.0, which a sampling flag or
    ``--extra-body`` (merged last) overrides. Chat requests carry no logprobs."""
    body: dict = {"model": model, "stream": True, "stream_options": {"include_usage": True}}
    if kind == "chat":
        body["messages"] = [{"role": "user", "content": [{"type": "text", "text": prompt}]}]
        if max_tokens is not None:
            body["max_completion_tokens"] = max_tokens
    else:
        body["prompt"] = prompt
        body["repetition_penalty"] = 1.0
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        body["logprobs"] = logprobs
    if ignore_eos:
        body["ignore_eos"] = True
    body.update(extra or {})
    return json.dumps(body, ensure_ascii=False).encode()


def messages_body(model: str, messages: list[dict], max_tokens: int | None, ignore_eos: bool,
                  extra: dict | None = None) -> bytes:
    """A chat request with a whole conversation so far (multi-turn runs): the same fields
    as ``request_body``'s chat form, with ``messages`` given instead of one prompt."""
    body = json.loads(request_body("chat", model, "", max_tokens, ignore_eos, extra))
    body["messages"] = messages
    return json.dumps(body, ensure_ascii=False).encode()


@dataclass(frozen=True, slots=True)
class Stream:
    """What a streamed response said, event by event."""

    token_ns: tuple[int, ...]
    texts: tuple[str, ...]
    completion_tokens: int | None
    prompt_tokens: int | None
    finished: bool  # a finish_reason or [DONE] was seen
    error: str | None
    first_reasoning_ns: int = 0  # first event with reasoning text (0: none)
    first_answer_ns: int = 0  # first event with answer text (0: none)
    answer: str = ""  # the answer text alone, no reasoning: what a chat client keeps in its history
    # a chat reply's tool calls, their streamed deltas joined by index: {"id", "type", "function":
    # {"name", "arguments"}} each (arguments the JSON text as streamed, maybe cut short)
    tool_calls: tuple[dict, ...] = ()
    finish_reason: str | None = None  # the last one seen ("tool_calls", "length", "stop")


def interpret(kind: str, events: list[Event]) -> Stream:
    token_ns: list[int] = []
    texts: list[str] = []
    usage: dict = {}
    finished, error = False, None
    answers: list[str] = []
    first = {"reasoning": 0, "answer": 0}
    calls: dict[int, dict] = {}
    finish = None
    for ev in events:
        if ev.data == "[DONE]":
            finished = True
            continue
        try:
            data = json.loads(ev.data)
        except ValueError:
            error = f"malformed JSON in stream: {ev.data[:80]!r}"
            break
        if not isinstance(data, dict):
            continue
        if "error" in data and not data.get("choices"):
            error = f"server error in stream: {_error_text(data['error'])}"
            break
        error = _shape_problem(kind, data)
        if error:
            break
        usage = data.get("usage") or usage
        for choice in data.get("choices") or ():
            finished = finished or bool(choice.get("finish_reason"))
            finish = choice.get("finish_reason") or finish
        answer, reasoning = _token_text(kind, data)
        fragment = _tool_deltas(kind, data, calls)
        if answer is None and fragment is None:
            continue
        answer = answer or ""
        token_ns.append(ev.t_ns)
        texts.append(answer + reasoning + (fragment or ""))
        answers.append(answer)
        if reasoning and not first["reasoning"]:
            first["reasoning"] = ev.t_ns
        if answer and not first["answer"]:
            first["answer"] = ev.t_ns
    return Stream(tuple(token_ns), tuple(texts), usage.get("completion_tokens"),
                  usage.get("prompt_tokens"), finished, error, first["reasoning"], first["answer"],
                  "".join(answers), tuple(calls[i] for i in sorted(calls)), finish)


def _tool_deltas(kind: str, data: dict, calls: dict[int, dict]) -> str | None:
    """Join an event's ``delta.tool_calls`` into ``calls`` (by index: the first delta of a call
    carries its id, type and name, the next ones argument fragments, as vLLM streams them);
    the argument text it carried, or None when it carried no tool call."""
    if kind != "chat" or not data.get("choices"):
        return None
    deltas = (data["choices"][0].get("delta") or {}).get("tool_calls")
    if not deltas:
        return None
    text = ""
    for d in deltas:
        index = d.get("index")
        call = calls.setdefault(index if isinstance(index, int) else 0,
                                {"id": None, "type": "function", "function": {"name": None, "arguments": ""}})
        fn = d.get("function") or {}
        call["id"] = _text(d.get("id")) or call["id"]
        call["function"]["name"] = _text(fn.get("name")) or call["function"]["name"]
        call["function"]["arguments"] += _text(fn.get("arguments"))
        text += _text(fn.get("arguments"))
    return text


def _text(value) -> str:
    """A field that should be text: itself, else empty (a server's odd value is not a crash)."""
    return value if isinstance(value, str) else ""


def _shape_problem(kind: str, data: dict) -> str | None:
    """Why an event's fields cannot be read (a field of the wrong type), or None. Absent and
    null fields are fine: servers leave out what they have not got (usage until the end)."""
    choices, usage = data.get("choices"), data.get("usage")
    if choices is not None and not (isinstance(choices, list) and all(isinstance(c, dict) for c in choices)):
        return f"unreadable event in stream: 'choices' is not a list of objects: {str(choices)[:60]!r}"
    if usage is not None and not isinstance(usage, dict):
        return f"unreadable event in stream: 'usage' is not an object: {str(usage)[:60]!r}"
    for key in ("completion_tokens", "prompt_tokens"):
        n = (usage or {}).get(key)
        if n is not None and not (isinstance(n, int) and not isinstance(n, bool) and n >= 0):
            return f"unreadable event in stream: usage.{key} is not a count: {str(n)[:40]!r}"
    first = choices[0] if choices else {}
    texts = [("text", first.get("text"))]
    if kind == "chat":
        delta = first.get("delta")
        if delta is not None and not isinstance(delta, dict):
            return f"unreadable event in stream: 'delta' is not an object: {str(delta)[:60]!r}"
        texts = [(f"delta.{k}", (delta or {}).get(k)) for k in ("content", "reasoning", "reasoning_content")]
        calls = (delta or {}).get("tool_calls")
        if calls is not None and not (isinstance(calls, list) and all(
                isinstance(c, dict) and isinstance(c.get("function") or {}, dict) for c in calls)):
            return f"unreadable event in stream: 'delta.tool_calls' is not a list of objects: {str(calls)[:60]!r}"
    for name, text in texts:
        if text is not None and not isinstance(text, str):
            return f"unreadable event in stream: choices[0].{name} is not text: {str(text)[:40]!r}"
    return None


def _token_text(kind: str, data: dict) -> tuple[str | None, str]:
    """(answer text, reasoning text) this event carries; answer None if it carries no output.

    Reasoning is ``delta.reasoning`` (vLLM 0.32's DeltaMessage) or ``delta.reasoning_content``
    (older vLLM, DeepSeek's API)."""
    choices = data.get("choices")
    if not choices:
        return None, ""
    first = choices[0]
    if kind != "chat":
        return first.get("text") or "", ""
    delta = first.get("delta") or {}
    text = delta.get("content") or ""
    reasoning = delta.get("reasoning") or delta.get("reasoning_content") or ""
    return (text, reasoning) if (text or reasoning) else (None, "")


def _error_text(err) -> str:
    if isinstance(err, dict):
        return str(err.get("message") or err)
    return str(err)


def http_error(status: int, reason: str, body: bytes) -> str:
    """One line for a non-200 answer: status, reason and the server's message."""
    detail = ""
    try:
        detail = _error_text(json.loads(body).get("error") or json.loads(body).get("detail") or "")
    except (ValueError, AttributeError):
        detail = body[:200].decode("utf-8", errors="replace").strip()
    return f"HTTP {status} {reason}".strip() + (f": {detail}" if detail else "")
