"""Server-sent events, parsed from time-stamped byte pieces.

Runs after a response is complete, over the ``(t_ns, bytes)`` pieces the HTTP
layer stamped on arrival. An event's time is the arrival time of the piece that
carried its terminating blank line: that is when a client could first act on it.

Follows the SSE rules that matter for LLM servers: lines end in LF, CRLF or CR;
a blank line ends an event; ``:`` starts a comment (keep-alive pings); ``data:``
lines are joined with ``\\n``; one space after the colon is dropped. An event
with no data line is ignored.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Event:
    t_ns: int
    data: str
    event: str = ""


def parse_events(pieces: list[tuple[int, bytes]]) -> list[Event]:
    """All complete events in ``pieces``, plus a final unterminated one (a server
    that closes the stream right after its last ``data:`` line still sent it)."""
    events: list[Event] = []
    buf = b""
    t = 0
    for t, piece in pieces:
        buf += piece
        # a CR at the very end may be half of a CRLF split across reads
        hold = buf.endswith(b"\r")
        text = buf[:-1] if hold else buf
        text = text.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        *blocks, rest = text.split(b"\n\n")
        for block in blocks:
            _append(events, t, block)
        buf = rest + (b"\r" if hold else b"")
    if buf.strip():
        _append(events, t, buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n"))
    return events


def _append(events: list[Event], t: int, block: bytes) -> None:
    data_lines: list[str] = []
    kind = ""
    for line in block.decode("utf-8", errors="replace").split("\n"):
        if not line or line.startswith(":"):
            continue
        name, sep, value = line.partition(":")
        if not sep:  # a field with no colon has an empty value
            value = ""
        elif value.startswith(" "):
            value = value[1:]
        if name == "data":
            data_lines.append(value)
        elif name == "event":
            kind = value
    if data_lines:
        events.append(Event(t, "\n".join(data_lines), kind))
