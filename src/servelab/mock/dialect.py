"""vLLM's OpenAI wire format, byte for byte, pre-encoded per request.

The JSON mirrors vLLM's ``model_dump_json(exclude_unset=True)`` output for stream chunks
(checked against vllm 0.32's protocol classes): content chunks carry ``stop_reason``,
``prompt_token_ids`` and ``token_ids`` as nulls and no ``usage`` key; the usage-only
chunk has ``"choices": []``. Each SSE event is one HTTP chunk, as uvicorn writes it.
"""

from __future__ import annotations

import json

# Words chosen to be one token each (with the leading space) in common BPE vocabularies,
# so a client that re-tokenizes the text counts what the mock says it sent (checked with
# Qwen3's tokenizer: text_for(0, n) encodes to exactly n tokens for n up to 1000).
WORDS = (" the", " quick", " brown", " fox", " jumps", " over", " a", " lazy", " dog", " and")

DONE = b"data: [DONE]\n\n"
LAST_CHUNK = b"0\r\n\r\n"


def chunk(payload: bytes) -> bytes:
    """One HTTP/1.1 chunk: hex length, CRLF, data, CRLF."""
    return b"%x\r\n%b\r\n" % (len(payload), payload)


def sse(obj_json: str) -> bytes:
    return chunk(b"data: " + obj_json.encode() + b"\n\n")


def text_for(first_token: int, n_tokens: int) -> str:
    return "".join(WORDS[(first_token + i) % len(WORDS)] for i in range(n_tokens))


def estimate_prompt_tokens(prompt: object) -> int:
    """Prompt tokens without a tokenizer: a list of token ids counts exactly; text counts
    one token per whitespace-separated word (exact for prompts built from ``WORDS``, an
    underestimate for real text, which is fine for a mock's usage and counters)."""
    if isinstance(prompt, str):
        return len(prompt.split())
    if isinstance(prompt, list) and prompt and all(isinstance(x, int) for x in prompt):
        return len(prompt)
    if isinstance(prompt, list):
        return sum(estimate_prompt_tokens(p) for p in prompt)
    if isinstance(prompt, dict):  # a chat message, or a content part {"type": "text", "text": ...}
        return estimate_prompt_tokens(prompt.get("content", prompt.get("text", "")))
    return 0


class Wire:
    """Pre-encoded events for one response (completions or chat, one choice)."""

    __slots__ = ("chat", "head", "tail", "created", "rid", "model", "_cache", "_mid", "tokens", "tool", "_args")

    def __init__(self, chat: bool, rid: str, model: str, created: int,
                 tokens: tuple[str, ...] | None = None, tool: tuple[str, str] | None = None) -> None:
        """``tokens``: this response's own words (mock/answers.py), one string a token;
        None: the cycle of ``WORDS`` (its events cached, since they repeat). ``tool``: (call
        id, tool name) when the reply is a tool call (``tool_delta``)."""
        self.chat, self.rid, self.model, self.created = chat, rid, model, created
        self.tokens, self.tool, self._args = tokens, tool, False
        obj = "chat.completion.chunk" if chat else "text_completion"
        self.head = (
            f'{{"id":{json.dumps(rid)},"object":"{obj}","created":{created},'
            f'"model":{json.dumps(model)},"choices":'
        )
        text_key = '"delta":{"content":' if chat else '"text":'
        self.tail = text_key
        self._cache: dict[tuple[int, int, str | None, bool], bytes] = {}
        self._mid: list[bytes | None] = [None] * len(WORDS)

    def role(self) -> bytes:
        """vLLM's first chat chunk: role and empty content, no output token."""
        return sse(
            self.head + '[{"index":0,"delta":{"role":"assistant","content":""},'
            '"logprobs":null,"finish_reason":null}],"prompt_token_ids":null,"prompt_text":null}'
        )

    def middle(self, j: int, tpe: int) -> bytes:
        """Content event j of a stream, not the last (fast path: cached by j mod len(WORDS),
        which fixes its text since every earlier event carried ``tpe`` tokens)."""
        if self.tokens is not None or self.tool is not None:
            return self._content(j * tpe, tpe, None)
        i = j % len(WORDS)
        ev = self._mid[i]
        if ev is None:
            ev = self._mid[i] = self._content(j * tpe, tpe, None)
        return ev

    def content(self, first_token: int, n_tokens: int, finish_reason: str | None,
                reasoning: bool = False) -> bytes:
        """Tokens ``first_token``.. as one event; ``reasoning``: as a chat reasoning delta."""
        if self.tokens is not None or self.tool is not None:
            return self._content(first_token, n_tokens, finish_reason, reasoning)
        key = (first_token % len(WORDS), n_tokens, finish_reason, reasoning)
        ev = self._cache.get(key)
        if ev is None:
            ev = self._cache[key] = self._content(first_token, n_tokens, finish_reason, reasoning)
        return ev

    def _content(self, first_token: int, n_tokens: int, finish_reason: str | None,
                 reasoning: bool = False) -> bytes:
        if self.tool is not None:
            return self.tool_delta(first_token, n_tokens, finish_reason)
        text = json.dumps(self.text(first_token, n_tokens))
        close = "}" if self.chat else ""
        fr = json.dumps(finish_reason)
        extra = "" if self.chat else ',"prompt_token_ids":null'
        tail = '"delta":{"reasoning":' if reasoning and self.chat else self.tail
        return sse(
            f'{self.head}[{{"index":0,{tail}{text}{close},"logprobs":null,'
            f'"finish_reason":{fr},"stop_reason":null{extra},"token_ids":null}}]}}'
        )

    def tool_delta(self, first_token: int, n_tokens: int, finish_reason: str | None) -> bytes:
        """A tool call streamed as vLLM streams one: the first event names the call (id, type,
        function name; its tokens the call's preamble), each later one an argument fragment,
        ``{"path": "`` then the event's words; a reply that stops (finish_reason "tool_calls")
        closes the JSON, one cut at max_tokens ("length") leaves it open."""
        fn: dict = {}
        call: dict = {"index": 0}
        if first_token == 0:
            call.update(id=self.tool[0], type="function")
            fn["name"] = self.tool[1]
        else:
            words = self.text(first_token, n_tokens)
            fn["arguments"] = words if self._args else '{"path": "' + words.lstrip()
            self._args = True
        if finish_reason == "stop":
            fn["arguments"] = fn.get("arguments", "") + ('"}' if self._args else "{}")
        call["function"] = fn
        fr = json.dumps("tool_calls" if finish_reason == "stop" else finish_reason)
        delta = json.dumps({"tool_calls": [call]}, separators=(",", ":"))
        return sse(f'{self.head}[{{"index":0,"delta":{delta},"logprobs":null,"finish_reason":{fr},'
                   f'"stop_reason":null,"token_ids":null}}]}}')

    def text(self, first_token: int, n_tokens: int) -> str:
        if self.tokens is None:
            return text_for(first_token, n_tokens)
        return "".join(self.tokens[first_token:first_token + n_tokens])

    def usage(self, prompt_tokens: int, completion_tokens: int) -> bytes:
        return sse(self.head + "[]," + '"usage":' + usage_json(prompt_tokens, completion_tokens) + "}")

    def full(self, n_tokens: int, finish_reason: str, prompt_tokens: int) -> bytes:
        """A non-streaming response body (vLLM's field order, trimmed of null extras)."""
        text = json.dumps(self.text(0, n_tokens))
        if self.tool is not None:
            args = '{"path": "' + self.text(1, n_tokens - 1).strip() + ('"}' if finish_reason == "stop" else "")
            call = {"id": self.tool[0], "type": "function", "function": {"name": self.tool[1], "arguments": args}}
            finish_reason = "tool_calls" if finish_reason == "stop" else finish_reason
            obj, choice = "chat.completion", (f'"message":{{"role":"assistant","content":null,"tool_calls":'
                                              f'{json.dumps([call])}}}')
        elif self.chat:
            obj, choice = "chat.completion", f'"message":{{"role":"assistant","content":{text}}}'
        else:
            obj, choice = "text_completion", f'"text":{text}'
        return (
            f'{{"id":{json.dumps(self.rid)},"object":"{obj}","created":{self.created},'
            f'"model":{json.dumps(self.model)},"choices":[{{"index":0,{choice},"logprobs":null,'
            f'"finish_reason":"{finish_reason}","stop_reason":null}}],'
            f'"usage":{usage_json(prompt_tokens, n_tokens)}}}'
        ).encode()


def usage_json(prompt_tokens: int, completion_tokens: int) -> str:
    return (
        f'{{"prompt_tokens":{prompt_tokens},"total_tokens":{prompt_tokens + completion_tokens},'
        f'"completion_tokens":{completion_tokens}}}'
    )


def error_body(message: str, status: int, kind: str) -> bytes:
    """vLLM's ErrorResponse: ``{"error": {"message", "type", "param", "code"}}``."""
    return json.dumps(
        {"error": {"message": message, "type": kind, "param": None, "code": status}},
        separators=(",", ":"),
    ).encode()


def models_body(model: str, max_model_len: int, created: int, root: str | None = None) -> bytes:
    card = {
        "id": model, "object": "model", "created": created, "owned_by": "servelab-mock",
        "root": root or model, "parent": None, "max_model_len": max_model_len, "permission": [],
    }
    return json.dumps({"object": "list", "data": [card]}, separators=(",", ":")).encode()


# (name, type, help) in vLLM's names; counters are exposed with ``_total`` as
# prometheus_client does.
METRICS = (
    ("vllm:num_requests_running", "gauge", "Number of requests in model execution batches."),
    ("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed."),
    ("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage (mock: running / max_open)."),
    ("vllm:prompt_tokens", "counter", "Number of prefill tokens processed."),
    ("vllm:generation_tokens", "counter", "Number of generation tokens processed."),
)


def metrics_text(model: str, values: dict[str, float], success: dict[str, int]) -> bytes:
    labels = f'engine="0",model_name="{model}"'
    lines = []
    for name, kind, help_text in METRICS:
        shown = name + "_total" if kind == "counter" else name
        lines += [f"# HELP {shown} {help_text}", f"# TYPE {shown} {kind}",
                  f"{shown}{{{labels}}} {float(values[name])}"]
    lines += ["# HELP vllm:request_success_total Count of successfully processed requests.",
              "# TYPE vllm:request_success_total counter"]
    for reason in ("stop", "length", "abort"):
        lines.append(f'vllm:request_success_total{{{labels},finished_reason="{reason}"}} '
                     f"{float(success.get(reason, 0))}")
    return ("\n".join(lines) + "\n").encode()
