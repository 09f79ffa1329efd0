"""What the mock does on one connection: ``Connection`` parses requests and serves one
response at a time; ``Generation`` is one response, a ``Scheduler`` job that writes each
event at its due time and stamps the write in its ``RequestLog`` (see ``server.py``)."""

from __future__ import annotations

from time import perf_counter_ns
from typing import TYPE_CHECKING, Protocol

from servelab.mock import http
from servelab.mock.config import MockConfig
from servelab.mock.dialect import DONE, LAST_CHUNK, Wire, chunk, error_body
from servelab.mock.plan import Plan
from servelab.mock.schedule import Scheduler
from servelab.mock.truth import RequestLog

if TYPE_CHECKING:
    from servelab.mock.wire import SocketTransport

# Events written per connection per tick when several are due at once (zero delay, or a
# client that fell behind): big enough to amortize a write, small enough to be fair.
BATCH = 128
JSON = "application/json"


class MockServer(Protocol):
    """What a connection and a response use of the server (``server.MockServer``, which
    imports this module)."""

    config: MockConfig
    scheduler: Scheduler
    conns: set[Connection]
    success: dict[str, int]
    generation_tokens_total: int

    def route(self, conn: Connection, req: http.Request, now: int) -> None: ...

    def release(self, gen: Generation, t_ns: int, finish: str) -> None: ...


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
