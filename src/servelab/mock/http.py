"""The little HTTP/1.1 the mock needs: parse a request, frame a response.

A framework would cost more per request than the whole mock; we only need request
line, headers, a Content-Length body, keep-alive, and chunked responses.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_HEAD = 64 * 1024
REASONS = {
    200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
    411: "Length Required", 431: "Request Header Fields Too Large",
    500: "Internal Server Error", 503: "Service Unavailable",
}


class BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(slots=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes
    keep_alive: bool


def parse_request(buf: bytearray) -> tuple[Request | None, int]:
    """Parse one request from the front of ``buf``: (request, bytes used), or
    (None, 0) while it is incomplete. Raises BadRequest for what we cannot serve."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        if len(buf) > MAX_HEAD:
            raise BadRequest(431, "request head too large")
        return None, 0
    lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
    method, path, version = _request_line(lines[0])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raise BadRequest(411, "chunked request bodies are not supported; send Content-Length")
    size = _content_length(headers)
    total = end + 4 + size
    if len(buf) < total:
        return None, 0
    conn = headers.get("connection", "").lower()
    keep = "close" not in conn if version == "HTTP/1.1" else "keep-alive" in conn
    return Request(method, path.split("?", 1)[0], headers, bytes(buf[end + 4:total]), keep), total


def _request_line(line: str) -> tuple[str, str, str]:
    parts = line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise BadRequest(400, f"bad request line {line[:80]!r}")
    return parts[0], parts[1], parts[2]


def _content_length(headers: dict[str, str]) -> int:
    try:
        size = int(headers.get("content-length", "0"))
    except ValueError:
        raise BadRequest(400, "bad Content-Length") from None
    if size < 0:
        raise BadRequest(400, "bad Content-Length")
    return size


def head(status: int, headers: list[tuple[str, str]]) -> bytes:
    lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Unknown')}", "server: servelab-mock"]
    lines += [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def response(status: int, body: bytes, content_type: str, keep_alive: bool,
             extra: list[tuple[str, str]] | None = None) -> bytes:
    headers = [("content-type", content_type), ("content-length", str(len(body)))]
    if not keep_alive:
        headers.append(("connection", "close"))
    return head(status, headers + (extra or [])) + body


def stream_head(request_id: str, keep_alive: bool) -> bytes:
    """Headers of an SSE response, written the moment the request is accepted (uvicorn
    does the same), so header arrival says nothing about the first token."""
    headers = [
        ("content-type", "text/event-stream; charset=utf-8"),
        ("transfer-encoding", "chunked"),
        ("x-request-id", request_id),
    ]
    if not keep_alive:
        headers.append(("connection", "close"))
    return head(200, headers)
