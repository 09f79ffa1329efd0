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
    DONE, LAST_CHUNK, Wire, chunk, error_body, estimate_prompt_tokens, metrics_text, models_body,
)
from servelab.mock.plan import Plan, Planner
from servelab.mock.schedule import Scheduler
from servelab.mock.truth import RequestLog, Truth, TruthLog
from servelab.mock.wire import Listener, SocketTransport

try:  # msgspec decodes request bodies several times faster than json; optional.
    import msgspec

    _loads = msgspec.json.decode
    _dumps = msgspec.json.encode
except ImportError:  # pragma: no cover - depends on the environment
    _loads = json.loads

    def _dumps(obj) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()


# Events written per connection per tick when several are due at once (zero delay, or a
# client that fell behind): big enough to amortize a write, small enough to be fair.
BATCH = 128
JSON = "application/json"


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
                                           "body": req.body.decode("utf-8", errors="replace")})
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
        plan = self.planner.next(ask.max_tokens, ask.ignore_eos)
        log.planned_tokens = plan.n_tokens
        self.truth_log.begin(log)
        if plan.failure == "http500":
            self._fail_500(conn, req, log)
            return
        wire = Wire(chat, ("chatcmpl-" if chat else "cmpl-") + rid, self.config.model, int(time.time()))
        gen = Generation(self, conn, log, wire, plan, req.keep_alive, ask.include_usage)
        conn.start(gen)
        if ask.stream:
            conn.transport.write(http.stream_head(rid, req.keep_alive))
        self._queue_or_admit(gen, now)

    def _fail_500(self, conn: Connection, req: http.Request, log: RequestLog) -> None:
        body = error_body("mock: injected failure", 500, "InternalServerError")
        conn.reply(500, body, req.keep_alive, extra=[("x-request-id", log.request_id)])
        self.truth_log.end(log, perf_counter_ns(), "http500")

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
        )


def _max_tokens(body: dict, chat: bool, default: int) -> int:
    value = body.get("max_completion_tokens") if chat else None
    value = body.get("max_tokens") if value is None else value
    value = default if value is None else value
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"max_tokens must be an integer >= 1, got {value!r}")
    return value


def _request_id(rid: object) -> str | None:
    """The client's ``X-Request-Id`` (vLLM's header), else the body's ``request_id``;
    only printable ASCII, since it is echoed in a header."""
    if isinstance(rid, str) and rid and rid.isascii() and rid.isprintable():
        return rid
    return None


class Connection:
    """One client connection (the protocol of a ``wire.SocketTransport``): parses requests,
    serves one response at a time (requests pipelined behind a stream wait in the buffer)."""

    __slots__ = ("server", "transport", "buf", "wire_ns", "gen", "paused", "blocked", "closed")

    def __init__(self, server: MockServer) -> None:
        self.server = server
        self.transport: SocketTransport | None = None
        self.buf = bytearray()
        self.wire_ns: int | None = None  # kernel arrival stamp of the last read
        self.gen: Generation | None = None  # the response in progress
        self.paused = False  # transport buffer over its high-water mark: the client lags
        self.blocked: Generation | None = None  # waits for resume_writing
        self.closed = False

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.server.conns.add(self)

    def data_received(self, data: bytes, wire_ns: int | None) -> None:
        now = perf_counter_ns()  # the request's last bytes are read: its recv time
        self.buf += data
        self.wire_ns = wire_ns  # ... and arrived at the socket then (kernel stamp)
        if self.gen is None:
            self.serve(now)

    def serve(self, now: int) -> None:
        while self.gen is None and not self.closed:
            try:
                req, used = http.parse_request(self.buf)
            except http.BadRequest as exc:
                self.reply(exc.status, error_body(str(exc), exc.status, "BadRequestError"), False)
                return
            if req is None:
                return
            del self.buf[:used]
            self.server.route(self, req, now)

    def reply(self, status: int, body: bytes, keep_alive: bool, ctype: str = JSON,
              extra: list[tuple[str, str]] | None = None) -> None:
        if self.closed:
            return
        self.transport.write(http.response(status, body, ctype, keep_alive, extra))
        if not keep_alive:
            self.close()

    def start(self, gen: Generation) -> None:
        self.gen = gen

    def done(self, keep_alive: bool) -> None:
        """The response ended; serve what the client sent meanwhile, or close."""
        self.gen = None
        if not keep_alive:
            self.close()
        elif self.buf:
            self.serve(perf_counter_ns())

    def eof_received(self) -> None:
        """The client shut its side: gone, as vLLM's server (uvicorn) takes it — the
        response in progress ends as a disconnect. Closing here, not in the transport,
        marks the connection closed at once, so no later write is recorded as sent."""
        self.close()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.conns.discard(self)
        if self.gen is not None:
            self.gen.lost(perf_counter_ns(), "disconnect")

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        gen, self.blocked = self.blocked, None
        if gen is not None and not self.closed:
            self.server.scheduler.add(perf_counter_ns(), gen)


class Generation:
    """One response being generated: a scheduler job that writes its due events.

    A streamed response has ``ceil(n_tokens / tokens_per_event)`` content events; event
    j is due at ``admit + ttft + j·itl``. A non-streamed one is a single write, due when
    its last event would have been. ``abort``/``stall`` stop after half the events.
    """

    __slots__ = (
        "server", "conn", "log", "wire", "plan", "keep_alive", "include_usage",
        "tpe", "n_events", "stop_at", "sent", "base_ns", "itl_ns", "role_pending", "reasoning_len",
    )

    def __init__(self, server: MockServer, conn: Connection, log: RequestLog, wire: Wire,
                 plan: Plan, keep_alive: bool, include_usage: bool) -> None:
        cfg = server.config
        self.server, self.conn, self.log, self.wire, self.plan = server, conn, log, wire, plan
        self.keep_alive = keep_alive and not (log.stream and cfg.close_after_response)
        self.include_usage = include_usage
        self.tpe = cfg.tokens_per_event
        streamed_events = -(-plan.n_tokens // self.tpe)
        self.n_events = streamed_events if log.stream else 1
        self.stop_at = self.n_events // 2 if plan.failure in ("abort", "stall") else self.n_events
        self.sent = 0
        self.itl_ns = round(cfg.itl_ms * 1e6)
        # Non-streamed: one write when the last token would have been streamed.
        last = 0 if log.stream else (streamed_events - 1) * self.itl_ns
        self.base_ns = round(cfg.ttft_ms * 1e6) + last
        self.role_pending = wire.chat and log.stream
        self.reasoning_len = cfg.reasoning_len if wire.chat else 0

    def admit(self, now: int) -> None:
        self.log.admit_ns = now
        self.base_ns += now
        self.server.scheduler.add(self.base_ns, self)

    def fire(self, now: int) -> int | None:
        if self.log.finish is not None or self.conn.closed:
            return None
        if self.conn.paused:
            self.conn.blocked = self  # resume_writing puts us back on the schedule
            return None
        if now < self.base_ns:
            return self.base_ns
        due = self.n_events if self.itl_ns == 0 else (now - self.base_ns) // self.itl_ns + 1
        upto = min(due, self.stop_at, self.sent + BATCH)
        if upto == self.sent + 1 and 0 < upto < self.n_events and self.log.stream and not self.role_pending:
            self._write_one()  # the paced steady state: one middle event, no joins
        elif upto > self.sent:
            self._write(upto) if self.log.stream else self._write_full()
        if self.sent >= self.stop_at:
            self._end()
            return None
        return self.base_ns + self.sent * self.itl_ns

    def _write_one(self) -> None:
        tpe = self.tpe
        first = self.sent * tpe
        if first < self.reasoning_len:
            event = self.wire.content(first, tpe, None, reasoning=True)
        else:
            event = self.wire.middle(self.sent, tpe)
        t = perf_counter_ns()
        self.conn.transport.write(event)
        self.log.event_ns.append(t)
        self.log.event_tokens.append(tpe)
        self.server.generation_tokens_total += tpe
        self.sent += 1

    def _write(self, upto: int) -> None:
        parts, tokens = self._events(upto)
        if upto == self.n_events:
            if self.include_usage:
                parts.append(self.wire.usage(self.log.prompt_tokens, self.plan.n_tokens))
            parts += (chunk(DONE), LAST_CHUNK)
        t = perf_counter_ns()
        self.conn.transport.write(b"".join(parts))
        self.log.event_ns.extend([t] * len(tokens))
        self.log.event_tokens.extend(tokens)
        self.server.generation_tokens_total += sum(tokens)
        self.sent = upto

    def _events(self, upto: int) -> tuple[list[bytes], list[int]]:
        parts: list[bytes] = []
        if self.role_pending:  # vLLM sends it just before the first token
            parts.append(self.wire.role())
            self.role_pending = False
        tokens, n, tpe, last = [], self.plan.n_tokens, self.tpe, self.n_events - 1
        content = self.wire.content
        for j in range(self.sent, upto):
            first = j * tpe
            k = tpe if first + tpe <= n else n - first
            parts.append(content(first, k, self.plan.finish_reason if j == last else None,
                                 first < self.reasoning_len))
            tokens.append(k)
        return parts, tokens

    def _write_full(self) -> None:
        n = self.plan.n_tokens
        body = self.wire.full(n, self.plan.finish_reason, self.log.prompt_tokens)
        t = perf_counter_ns()
        self.conn.transport.write(http.response(200, body, JSON, self.keep_alive))
        self.log.event_ns.append(t)
        self.log.event_tokens.append(n)
        self.server.generation_tokens_total += n
        self.sent = 1

    def _end(self) -> None:
        t = perf_counter_ns()
        failure = self.plan.failure if self.sent < self.n_events else None
        if failure == "stall":
            return  # stays open and running until the client or the server gives up
        if failure == "abort":
            self.server.release(self, t, "abort")
            self.conn.gen = None
            self.conn.close()
            return
        reason = self.log.finish_reason = self.plan.finish_reason
        self.server.success[reason] = self.server.success.get(reason, 0) + 1
        # It ended when its last bytes were written (stamped just before the write): a
        # client in another thread may finish reading while ``send`` still holds us.
        self.server.release(self, self.log.event_ns[-1] if self.log.event_ns else t, "ok")
        self.conn.done(self.keep_alive)

    def lost(self, now: int, why: str) -> None:
        """The connection went away (or the server stops) before the response ended."""
        if self.log.finish is not None:
            return
        stalled = self.plan.failure == "stall" and self.sent >= self.stop_at
        self.server.release(self, now, "stall" if stalled else why)
