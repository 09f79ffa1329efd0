"""An OpenAI-compatible mock server that records the truth of what it sent.

Built on the event loop's readers and writers (uvloop when present; sockets read with the
kernel's arrival stamp, see ``wire.py``) with its own tiny HTTP/1.1, because the point is speed: one core must keep 512 streams on schedule and push hundreds of
thousands of events a second, or the mock, not the client, would be what a test measures.

Flow: a connection parses a request → ``MockServer.route`` → for a generation, the
``Planner`` decides failure and length, the ``Wire`` pre-encodes its events, and a
``Generation`` is put on the shared ``Scheduler``, which writes each event at its
absolute due time and stamps the write in the ``TruthLog``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from dataclasses import dataclass
from itertools import count
from time import perf_counter_ns

from servelab.mock import http
from servelab.mock.config import MockConfig
from servelab.mock.dialect import (
    Wire, error_body, estimate_prompt_tokens, metrics_text, models_body,
)
from servelab.mock.answers import Answerer, load_key, prompt_key
from servelab.mock.constrained import constraint_of, tokens_of, valid_text
from servelab.mock.plan import Plan, Planner
from servelab.mock.schedule import Scheduler
from servelab.mock.truth import RequestLog, Truth, TruthLog
from servelab.mock.response import Connection, Generation
from servelab.mock.wire import Listener

try:  # msgspec decodes request bodies several times faster than json; optional.
    import msgspec

    _loads = msgspec.json.decode
    _dumps = msgspec.json.encode
except ImportError:  # pragma: no cover - depends on the environment
    _loads = json.loads

    def _dumps(obj) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop when installed (about twice the events per second), else asyncio's."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class MockServer:
    """``await start()`` binds (``port`` 0 picks a free one; see ``.port``), ``await
    stop()`` closes everything; ``.truth`` is a snapshot of what was sent."""

    def __init__(self, config: MockConfig) -> None:
        self.config = config
        self.truth_log = TruthLog(config.to_dict())
        self.planner = Planner(config)
        self.answerer = None if config.answers == "cycle" else Answerer(
            config.corrupt_rate, config.corrupt_seed, config.ignore_temperature, load_key(config.answer_key))
        self.host, self.port = config.host, config.port
        self.scheduler: Scheduler | None = None
        self.conns: set[Connection] = set()
        self.waiting: deque[Generation] = deque()
        self.running = 0
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.success: dict[str, int] = {}
        self._server: Listener | None = None
        self._ids = count()
        self._created = int(time.time())

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.scheduler = Scheduler(loop)
        self._server = Listener(loop, self.config.host, self.config.port, lambda: Connection(self))
        self.port = self._server.port

    async def stop(self) -> None:
        server = self._server
        if server is None:
            return
        server.close()
        self._server = None  # also: release() admits nobody from now on
        now = perf_counter_ns()
        for conn in list(self.conns):
            if conn.gen is not None:
                conn.gen.lost(now, "stopped")
            conn.transport.abort()
        self.scheduler.close()
        await asyncio.sleep(0)  # let connection_lost run

    @property
    def truth(self) -> Truth:
        return self.truth_log.snapshot()

    def truth_dict(self) -> dict:
        return self.truth_log.to_dict()

    def reset_truth(self) -> None:
        self.truth_log.reset()

    # -- routing -------------------------------------------------------------------

    def route(self, conn: Connection, req: http.Request, now: int) -> None:
        if self.config.keep_requests and not req.path.startswith("/_servelab/"):
            self.truth_log.received.append({"method": req.method, "path": req.path, "headers": dict(req.headers),
                                           "body": req.body.decode("utf-8", errors="replace"),
                                           # the client's address: which client process's connection it came on
                                           "peer": list(conn.transport.get_extra_info("peername") or ())})
        route = ROUTES.get(req.path)
        if route is None:
            conn.reply(404, error_body(f"no route {req.path}", 404, "NotFoundError"), req.keep_alive)
        elif req.method != route[0]:
            conn.reply(405, error_body(f"use {route[0]} {req.path}", 405, "BadRequestError"), req.keep_alive)
        else:
            route[1](self, conn, req, now)

    def _completions(self, conn: Connection, req: http.Request, now: int) -> None:
        self._generate(conn, req, now, chat=False)

    def _chat(self, conn: Connection, req: http.Request, now: int) -> None:
        self._generate(conn, req, now, chat=True)

    def _models(self, conn: Connection, req: http.Request, now: int) -> None:
        body = models_body(self.config.model, self.config.max_model_len, self._created, self.config.root)
        conn.reply(200, body, req.keep_alive)

    def _ok(self, conn: Connection, req: http.Request, now: int) -> None:
        conn.reply(200, b"", req.keep_alive)

    def _metrics(self, conn: Connection, req: http.Request, now: int) -> None:
        cap = self.config.max_open
        values = {
            "vllm:num_requests_running": self.running,
            "vllm:num_requests_waiting": len(self.waiting),
            "vllm:kv_cache_usage_perc": self.running / cap if cap else 0.0,
            "vllm:prompt_tokens": self.prompt_tokens_total,
            "vllm:generation_tokens": self.generation_tokens_total,
        }
        body = metrics_text(self.config.model, values, self.success)
        conn.reply(200, body, req.keep_alive, "text/plain; version=0.0.4; charset=utf-8")

    def _truth(self, conn: Connection, req: http.Request, now: int) -> None:
        conn.reply(200, _dumps(self.truth_dict()), req.keep_alive)

    def _truth_reset(self, conn: Connection, req: http.Request, now: int) -> None:
        self.reset_truth()
        conn.reply(200, b"{}", req.keep_alive)

    # -- generation ----------------------------------------------------------------

    def _generate(self, conn: Connection, req: http.Request, now: int, chat: bool) -> None:
        try:
            ask = Ask.parse(_loads(req.body), chat, self.config.default_max_tokens)
        except Exception as exc:  # any malformed body is the client's 400, never a crash
            conn.reply(400, error_body(f"bad request body: {exc}", 400, "BadRequestError"), req.keep_alive)
            return
        rid = _request_id(req.headers.get("x-request-id") or ask.request_id) or f"mock-{next(self._ids)}"
        log = RequestLog(rid, "chat" if chat else "completions", ask.stream, now, conn.wire_ns)
        log.prompt_tokens = ask.prompt_tokens
        if self.config.record_messages:
            log.messages = ask.messages
        if self.config.enforce_max_model_len and ask.prompt_tokens >= self.config.max_model_len:
            self._too_long(conn, req, log)
            return
        plan = self.planner.next(ask.max_tokens, ask.ignore_eos)
        tokens = None
        if self.answerer is not None:
            plan, tokens = self._answer(plan, ask, log)
        if ask.constraint is not None:
            plan, tokens = self._constrained(plan, ask, log, tokens)
        log.planned_tokens = plan.n_tokens
        self.truth_log.begin(log)
        if plan.failure == "http500":
            self._fail_500(conn, req, log)
            return
        tool = _tool_name(ask, self.config.tool_calls) if chat else None
        if tool is not None:
            log.tool_call_id = f"chatcmpl-tool-{rid}"
        wire = Wire(chat, ("chatcmpl-" if chat else "cmpl-") + rid, self.config.model, int(time.time()), tokens,
                    None if tool is None else (log.tool_call_id, tool))
        gen = Generation(self, conn, log, wire, plan, req.keep_alive, ask.include_usage)
        conn.start(gen)
        if ask.stream:
            conn.transport.write(http.stream_head(rid, req.keep_alive))
        self._queue_or_admit(gen, now)

    def _answer(self, plan: Plan, ask: Ask, log: RequestLog) -> tuple[Plan, tuple[str, ...]]:
        """The request's own words (mock/answers.py); a keyed reply sets the length and stops."""
        ans = self.answerer.answer(ask.prompt, plan.n_tokens, ask.temperature, ask.seed)
        if ans.keyed:
            stop = len(ans.tokens) < plan.n_tokens or plan.finish_reason == "stop"
            plan = Plan(plan.failure, len(ans.tokens), "stop" if stop else "length")
        log.answer, log.corrupted_at = "".join(ans.tokens), ans.corrupted_at
        return plan, ans.tokens

    def _constrained(self, plan: Plan, ask: Ask, log: RequestLog, tokens) -> tuple[Plan, tuple[str, ...] | None]:
        """A structured-output request: a valid text (mock/constrained.py), cut at the planned length;
        unchanged when the mock ignores constraints or cannot build one (the truth's ``honoured`` says which)."""
        kind, value = ask.constraint
        log.constraint, log.honoured = kind, False
        text = None if self.config.ignore_constraints else valid_text(
            kind, value, int.from_bytes(prompt_key(ask.prompt)[:4], "big"))
        if text is None:
            return plan, tokens
        whole = tokens_of(text)
        out = whole[:plan.n_tokens]
        log.answer, log.honoured = "".join(out), len(out) == len(whole)
        return Plan(plan.failure, len(out), "stop" if log.honoured else "length"), out

    def _fail_500(self, conn: Connection, req: http.Request, log: RequestLog) -> None:
        body = error_body("mock: injected failure", 500, "InternalServerError")
        conn.reply(500, body, req.keep_alive, extra=[("x-request-id", log.request_id)])
        self.truth_log.end(log, perf_counter_ns(), "http500")

    def _too_long(self, conn: Connection, req: http.Request, log: RequestLog) -> None:
        """vLLM's refusal of a prompt that leaves no room for one output token (a context overflow)."""
        self.truth_log.begin(log)
        body = error_body(f"This model's maximum context length is {self.config.max_model_len} tokens. However, "
                          f"your prompt contains {log.prompt_tokens} input tokens, which exceeds this limit even "
                          f"without any output tokens. Please reduce the length of the input prompt.", 400,
                          "BadRequestError")
        conn.reply(400, body, req.keep_alive, extra=[("x-request-id", log.request_id)])
        self.truth_log.end(log, perf_counter_ns(), "too_long")

    def _queue_or_admit(self, gen: Generation, now: int) -> None:
        cap = self.config.max_open
        if cap is not None and self.running >= cap:
            self.waiting.append(gen)  # FCFS, like a scheduler's waiting queue
        else:
            self.admit(gen, now)

    def admit(self, gen: Generation, now: int) -> None:
        self.running += 1
        self.prompt_tokens_total += gen.log.prompt_tokens
        gen.admit(now)

    def release(self, gen: Generation, t_ns: int, finish: str) -> None:
        """A generation ended (any way): record it, free its slot, admit the next."""
        self.truth_log.end(gen.log, t_ns, finish)
        if gen.log.admit_ns is None:
            self.waiting.remove(gen)  # it never left the waiting queue
            return
        self.running -= 1
        cap = self.config.max_open
        if self.waiting and self._server is not None and (cap is None or self.running < cap):
            self.admit(self.waiting.popleft(), perf_counter_ns())


ROUTES = {
    "/v1/completions": ("POST", MockServer._completions),
    "/v1/chat/completions": ("POST", MockServer._chat),
    "/v1/models": ("GET", MockServer._models),
    "/health": ("GET", MockServer._ok),
    "/metrics": ("GET", MockServer._metrics),
    "/reset_prefix_cache": ("POST", MockServer._ok),
    # vLLM serves these when started with --profiler-config; the mock has nothing to profile
    "/start_profile": ("POST", MockServer._ok),
    "/stop_profile": ("POST", MockServer._ok),
    "/_servelab/truth": ("GET", MockServer._truth),
    "/_servelab/truth/reset": ("POST", MockServer._truth_reset),
}


@dataclass(frozen=True, slots=True)
class Ask:
    """The fields of a generation request the mock obeys."""

    max_tokens: int
    stream: bool
    include_usage: bool
    ignore_eos: bool
    prompt_tokens: int
    request_id: object
    messages: object = None  # a chat request's messages, as received
    prompt: object = None  # the prompt (completions) or the messages (chat)
    temperature: float | None = None
    seed: object = None  # the request's sampling seed (vLLM's ``seed``)
    constraint: tuple | None = None  # (kind, value) of a structured-output request (mock/constrained.py)
    tools: object = None  # a chat request's tools and tool_choice, as received
    tool_choice: object = None
    last_role: object = None  # the role of a chat request's last message

    @classmethod
    def parse(cls, body: object, chat: bool, default_max_tokens: int) -> Ask:
        if not isinstance(body, dict):
            raise ValueError("the body must be a JSON object")
        options = body.get("stream_options") or {}
        if not isinstance(options, dict):
            raise ValueError("stream_options must be an object")
        return cls(
            max_tokens=_max_tokens(body, chat, default_max_tokens),
            stream=bool(body.get("stream")),
            include_usage=bool(options.get("include_usage")),
            ignore_eos=bool(body.get("ignore_eos")),
            prompt_tokens=estimate_prompt_tokens(body.get("messages") if chat else body.get("prompt")),
            request_id=body.get("request_id"),
            messages=body.get("messages") if chat else None,
            prompt=body.get("messages") if chat else body.get("prompt"),
            temperature=_number(body.get("temperature")), seed=body.get("seed"),
            constraint=constraint_of(body),
            tools=body.get("tools") if chat else None, tool_choice=body.get("tool_choice"),
            last_role=_last_role(body.get("messages")) if chat else None,
        )


def _last_role(messages: object) -> object:
    return messages[-1].get("role") if isinstance(messages, list) and messages and isinstance(
        messages[-1], dict) else None


def _tool_name(ask: Ask, rule: str) -> str | None:
    """The tool a request is answered with a call of, or None (MockConfig.tool_calls): its first
    tool's; a named ``tool_choice`` names it; "required" always calls, "none" never."""
    tools = ask.tools if isinstance(ask.tools, list) else []
    names = [t["function"].get("name") for t in tools if isinstance(t, dict) and isinstance(t.get("function"), dict)]
    names = [n for n in names if isinstance(n, str) and n]
    choice = ask.tool_choice
    if not names or choice == "none":
        return None
    if isinstance(choice, dict):
        named = (choice.get("function") or {}).get("name")
        return named if isinstance(named, str) and named else names[0]
    if choice == "required" or rule == "always" or (rule == "user" and ask.last_role == "user"):
        return names[0]
    return None


def _max_tokens(body: dict, chat: bool, default: int) -> int:
    value = body.get("max_completion_tokens") if chat else None
    value = body.get("max_tokens") if value is None else value
    value = default if value is None else value
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"max_tokens must be an integer >= 1, got {value!r}")
    return value


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _request_id(rid: object) -> str | None:
    """The client's ``X-Request-Id`` (vLLM's header), else the body's ``request_id``;
    only printable ASCII, since it is echoed in a header."""
    if isinstance(rid, str) and rid and rid.isascii() and rid.isprintable():
        return rid
    return None
