"""A stand-in OpenAI completions server for faults the mock does not play: it can
die after N responses (closing its socket and every connection, as a crashed server
does), or end its streams without a finish_reason and without ``[DONE]``.

Importable by name from any test (pytest puts ``tests/`` on the path).
"""

from __future__ import annotations

import asyncio
import json
import threading

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def event(obj: dict) -> bytes:
    return chunk(b"data: " + json.dumps(obj).encode() + b"\n\n")


class StandIn:
    """Streams ``tokens`` one-token events ``gap_s`` apart per request.

    ``die_after``: after that many complete responses the server stops listening and
    aborts every open connection. ``finish=False``: no finish_reason, no [DONE] (the
    HTTP body still ends properly).
    """

    def __init__(self, tokens: int = 8, gap_s: float = 0.005, die_after: int | None = None,
                 finish: bool = True) -> None:
        self.tokens, self.gap_s, self.die_after, self.finish = tokens, gap_s, die_after, finish
        self.completed = 0
        self._writers: set[asyncio.StreamWriter] = set()
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()
        self._thread = threading.Thread(target=self._main, args=(ready,), daemon=True)
        self._thread.start()
        ready.wait(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _main(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        ready.set()
        self._loop.run_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(h.split(b":")[1]) for h in head.split(b"\r\n")
                               if h.lower().startswith(b"content-length")), 0)
                await reader.readexactly(length)
                if head.startswith(b"GET"):
                    body = json.dumps({"data": [{"id": "standin"}]}).encode()
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
                    continue
                await self._stream(writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _stream(self, writer: asyncio.StreamWriter) -> None:
        writer.write(HEAD)
        for j in range(self.tokens):
            await asyncio.sleep(self.gap_s)
            last = self.finish and j == self.tokens - 1
            writer.write(event({"choices": [{"index": 0, "text": "x", "finish_reason": "length" if last else None}]}))
        if self.finish:
            writer.write(event({"choices": [], "usage": {"prompt_tokens": 16, "completion_tokens": self.tokens}}))
            writer.write(chunk(b"data: [DONE]\n\n"))
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        self.completed += 1
        if self.completed == self.die_after:
            self._die()

    def _die(self) -> None:
        self._server.close()
        for w in list(self._writers):
            w.transport.abort()

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._die)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
