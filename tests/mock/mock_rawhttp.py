"""A strict little HTTP/1.1 client on plain sockets, for testing the mock's framing.

Strict on purpose: every chunk must be ``hex CRLF data CRLF`` and, for SSE, exactly one
``data: ...\\n\\n`` event, so a framing slip in the mock fails a test instead of being
smoothed over by a forgiving client library.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes = b""
    chunks: list[bytes] = field(default_factory=list)
    complete: bool = True  # False: the connection ended before the response did

    @property
    def events(self) -> list[str]:
        """SSE payloads (text after ``data: ``), one per chunk."""
        out = []
        for c in self.chunks:
            assert c.startswith(b"data: ") and c.endswith(b"\n\n") and c.count(b"\n\n") == 1, c
            out.append(c[6:-2].decode())
        return out

    def json_events(self) -> list[dict]:
        return [json.loads(e) for e in self.events if e != "[DONE]"]

    def json(self):
        return json.loads(self.body)


class Conn:
    """One keep-alive connection."""

    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.file = self.sock.makefile("rb")
        self.partial: Response | None = None

    def close(self) -> None:
        self.file.close()
        self.sock.close()

    def send(self, method: str, path: str, body: object = None, headers: dict | None = None) -> None:
        data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        lines = [f"{method} {path} HTTP/1.1", "Host: test", f"Content-Length: {len(data)}"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + data)

    def read(self) -> Response:
        status_line = self.file.readline()
        if not status_line:
            raise ConnectionError("closed before a response")
        version, status, _ = status_line.decode().split(" ", 2)
        assert version == "HTTP/1.1"
        headers = self._headers()
        resp = self.partial = Response(int(status), headers)  # partial: what came before a timeout
        if headers.get("transfer-encoding") == "chunked":
            self._chunks(resp)
        else:
            resp.body = self.file.read(int(headers["content-length"]))
        return resp

    def request(self, method: str, path: str, body: object = None, headers: dict | None = None) -> Response:
        self.send(method, path, body, headers)
        return self.read()

    def at_eof(self) -> bool:
        return self.file.read(1) == b""

    def _headers(self) -> dict[str, str]:
        headers = {}
        while (line := self.file.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        return headers

    def _chunks(self, resp: Response) -> None:
        while True:
            size_line = self.file.readline()
            if not size_line:
                resp.complete = False
                return
            assert size_line.endswith(b"\r\n"), size_line
            size = int(size_line, 16)
            data = self.file.read(size + 2)
            if len(data) < size + 2:
                resp.complete = False
                return
            assert data.endswith(b"\r\n"), data[-10:]
            if size == 0:
                return
            resp.chunks.append(data[:-2])


def request(port: int, method: str, path: str, body: object = None, headers: dict | None = None) -> Response:
    conn = Conn(port)
    try:
        return conn.request(method, path, body, headers)
    finally:
        conn.close()


def metric(text: str, name: str) -> float:
    """The first sample ``name`` on the mock's /metrics page, read by the format's
    reference parser, so a page it cannot read fails the test."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                return float(sample.value)
    raise KeyError(name)
