"""A minimal HTTP/1.1 client on ``asyncio.Protocol``, built to measure.

Why not aiohttp/httpx: at hundreds of concurrent streams a general client spends
its core on per-chunk machinery, and every microsecond it spends delays the
timestamp of the next token. Here the hot path (``data_received``) does three
things only: take ``perf_counter_ns()`` the moment bytes arrive, strip the
chunked framing, and keep ``(t_ns, payload)``. SSE and JSON parsing happen after
the run, off the request loop (see ``client.openai``).

One ``Pool`` of keep-alive connections serves the whole run; a connection the
server closes (llama.cpp closes after every streamed response) is dropped and a
new one opened on demand. Time never goes backwards: all stamps come from
``time.perf_counter_ns`` (CLOCK_MONOTONIC).
"""

from __future__ import annotations

import asyncio
import ssl as ssl_module
import time
from collections import deque
from dataclasses import dataclass, field
from urllib.parse import urlsplit

_now = time.perf_counter_ns

_STALE = "connection closed before a response"

# body framing modes
_CHUNKED, _LENGTH, _UNTIL_CLOSE = 0, 1, 2


@dataclass(slots=True)
class Response:
    """One response as received: status, headers, and body pieces stamped on arrival.

    ``reads`` holds ``(t_ns, bytes)`` with the chunked framing already removed.
    ``closed_early`` means the connection closed before the body's declared end.
    """

    status: int = 0
    reason: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    reads: list[tuple[int, bytes]] = field(default_factory=list)
    done_ns: int = 0
    closed_early: bool = False
    error: str | None = None

    def body(self) -> bytes:
        return b"".join(piece for _, piece in self.reads)


class _Conn(asyncio.Protocol):
    """One keep-alive connection; parses one response at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.keep_alive = True
        self._resp: Response | None = None
        self._waiter: asyncio.Future | None = None
        self._buf = b""
        self._in_head = True
        self._mode = _CHUNKED
        self._remaining = 0  # bytes left in the current chunk / body
        self._chunk_trailer = 0  # CRLF bytes still to skip after a chunk

    # -- asyncio.Protocol ------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport

    def connection_lost(self, exc) -> None:
        self.closed = True
        if self._resp is not None and self._waiter is not None and not self._waiter.done():
            resp = self._resp
            resp.done_ns = _now()
            if self._in_head:
                resp.error = f"{_STALE} ({exc or 'by peer'})"
            elif self._mode != _UNTIL_CLOSE:
                resp.closed_early = True
            self._finish()

    def data_received(self, data: bytes) -> None:
        t = _now()  # first thing: this is the arrival time of every byte in `data`
        resp = self._resp
        if resp is None:
            return  # unsolicited bytes between responses: ignore
        if self._in_head:
            data = self._head(self._buf + data)
            if data is None:
                return
        if self._mode == _CHUNKED:
            self._dechunk(t, data)
        elif self._mode == _LENGTH:
            piece = data[: self._remaining]
            self._remaining -= len(piece)
            if piece:
                resp.reads.append((t, piece))
            if self._remaining <= 0:
                resp.done_ns = t
                self._finish()
        else:
            resp.reads.append((t, data))

    # -- parsing -----------------------------------------------------------
    def _head(self, data: bytes) -> bytes | None:
        """Parse status line and headers; return the body bytes that followed."""
        end = data.find(b"\r\n\r\n")
        if end < 0:
            self._buf = data
            return None
        self._buf = b""
        lines = data[:end].decode("latin-1").split("\r\n")
        resp = self._resp
        parts = lines[0].split(" ", 2)
        resp.status = int(parts[1])
        resp.reason = parts[2] if len(parts) > 2 else ""
        for line in lines[1:]:
            name, _, value = line.partition(":")
            resp.headers[name.strip().lower()] = value.strip()
        self._in_head = False
        self._set_mode(resp.headers)
        return data[end + 4 :]

    def _set_mode(self, headers: dict[str, str]) -> None:
        if headers.get("connection", "").lower() == "close":
            self.keep_alive = False
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._mode = _CHUNKED
        elif "content-length" in headers:
            self._mode = _LENGTH
            self._remaining = int(headers["content-length"])
            if self._remaining == 0:
                self._resp.done_ns = _now()
                self._finish()
        else:
            self._mode = _UNTIL_CLOSE
            self.keep_alive = False

    def _dechunk(self, t: int, data: bytes) -> None:
        """Strip chunked framing with slicing only (no per-byte Python work).

        Everything in one read arrived at the same instant ``t``, so the pieces
        of one read are joined into one ``(t, bytes)`` entry.
        """
        if self._buf:
            data = self._buf + data
            self._buf = b""
        parts: list[bytes] = []
        pos, n = 0, len(data)
        while pos < n:
            if self._chunk_trailer:  # the CRLF that closes a chunk's data
                skip = min(self._chunk_trailer, n - pos)
                self._chunk_trailer -= skip
                pos += skip
                continue
            if self._remaining:  # the rest of a chunk split across reads
                piece = data[pos : pos + self._remaining]
                self._remaining -= len(piece)
                pos += len(piece)
                parts.append(piece)
                if not self._remaining:
                    self._chunk_trailer = 2
                continue
            eol = data.find(b"\r\n", pos)
            if eol < 0:
                self._buf = data[pos:]
                break
            size = _chunk_size(data[pos:eol])
            pos = eol + 2
            if size == 0:  # last chunk; trailers (rare) are ignored
                self._keep(t, parts)
                self._resp.done_ns = t
                self._finish()
                return
            end = pos + size
            if end + 2 <= n:  # the usual case: the whole chunk is in this read
                parts.append(data[pos:end])
                pos = end + 2
            else:
                self._remaining = size
        self._keep(t, parts)

    def _keep(self, t: int, parts: list[bytes]) -> None:
        if parts:
            self._resp.reads.append((t, parts[0] if len(parts) == 1 else b"".join(parts)))

    def _finish(self) -> None:
        waiter, self._waiter = self._waiter, None
        self._resp = None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- used by Pool ----------------------------------------------------------
    def start(self, request: bytes, resp: Response, loop) -> asyncio.Future:
        self._resp, self._buf, self._in_head = resp, b"", True
        self._remaining = self._chunk_trailer = 0
        self._waiter = loop.create_future()
        self.transport.write(request)
        return self._waiter

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


class Pool:
    """Keep-alive connections to one origin, shared by every request of a run."""

    def __init__(self, base_url: str, *, verify_tls: bool = True, timeout_s: float = 6 * 3600) -> None:
        parts = urlsplit(base_url if "://" in base_url else f"http://{base_url}")
        self.scheme = parts.scheme or "http"
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if self.scheme == "https" else 80)
        self.base_path = parts.path.rstrip("/")
        self.timeout_s = timeout_s
        self._ssl = _ssl_context(verify_tls) if self.scheme == "https" else None
        self._idle: deque[_Conn] = deque()
        self._all: set[_Conn] = set()
        host = self.host if ":" not in self.host else f"[{self.host}]"
        default_port = self.port == (443 if self.scheme == "https" else 80)
        self.host_header = host if default_port else f"{host}:{self.port}"

    async def _open(self) -> _Conn:
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(_Conn, self.host, self.port, ssl=self._ssl)
        self._all.add(conn)
        return conn

    async def warm(self, n: int) -> None:
        """Open up to ``n`` idle connections before t0 so no measured request
        pays a TCP (or TLS) handshake the server never sees."""
        missing = max(0, n - len(self._idle))
        for start in range(0, missing, 256):
            batch = min(256, missing - start)
            conns = await asyncio.gather(*(self._open() for _ in range(batch)))
            self._idle.extend(conns)

    async def _acquire(self) -> _Conn:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
            self._all.discard(conn)
        return await self._open()

    def _release(self, conn: _Conn, resp: Response) -> None:
        unfinished = conn._waiter is not None  # cancelled mid-response
        if unfinished or conn.closed or not conn.keep_alive or resp.closed_early or resp.error:
            conn.abort()
            self._all.discard(conn)
        else:
            self._idle.append(conn)

    def build(self, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None) -> bytes:
        """Serialize one request (done before the clock starts, not on the hot path)."""
        lines = [f"{method} {self.base_path}{path} HTTP/1.1", f"Host: {self.host_header}"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        if body or method == "POST":
            lines.append(f"Content-Length: {len(body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

    async def send(self, request: bytes, on_sent=None) -> Response:
        """Send serialized bytes; return the whole response. Never raises for
        network trouble: the failure is put in ``Response.error``.

        ``on_sent`` is called with the send timestamp taken just before the
        write, after a connection was acquired (vLLM's ``st``).
        """
        resp = await self._send_once(request, on_sent)
        if resp.error and resp.status == 0 and resp.error.startswith(_STALE):
            # A reused keep-alive connection the server had just closed (uvicorn
            # drops idle ones after 5 s): nothing reached the server, send again.
            resp = await self._send_once(request, on_sent)
        return resp

    async def _send_once(self, request: bytes, on_sent) -> Response:
        resp = Response()
        conn = None
        try:
            conn = await self._acquire()
            if on_sent is not None:
                on_sent(_now())
            waiter = conn.start(request, resp, asyncio.get_running_loop())
            await asyncio.wait_for(waiter, self.timeout_s)
        except asyncio.TimeoutError:
            resp.error = f"timed out after {self.timeout_s:.0f} s"
        except OSError as exc:
            resp.error = f"{type(exc).__name__}: {exc}"
        finally:
            if conn is not None:
                self._release(conn, resp)
        if not resp.done_ns:
            resp.done_ns = _now()
        return resp

    async def request(self, method: str, path: str, body: bytes = b"", headers=None) -> Response:
        return await self.send(self.build(method, path, body, headers))

    def close(self) -> None:
        for conn in list(self._all):
            conn.abort()
        self._all.clear()
        self._idle.clear()


def _chunk_size(line: bytes) -> int:
    try:
        return int(line, 16)
    except ValueError:  # chunk extensions: "1a;name=value"
        return int(line.split(b";", 1)[0], 16)


def _ssl_context(verify: bool) -> ssl_module.SSLContext:
    ctx = ssl_module.create_default_context()
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl_module.CERT_NONE
    return ctx
