"""Finished responses → records while the run goes on, off the per-chunk path.

A raw response (its stamped byte pieces) costs ~17 KB for 32 tokens; kept to the end
of a long run they are the run's whole memory. The hot path stays as it is: the
pacer only appends a finished attempt here. Parsing (SSE, JSON, token counts) waits
until more than ``low`` bytes of raw responses are pending — a short run, like the
selftest, parses little or nothing before it ends — then takes one slice of the
event loop (``slice_ns``) per turn, so a chunk arriving meanwhile is stamped at most
a slice late. Above ``ceiling`` (a client too busy to keep up) the excess is parsed
at once: memory stays bounded, and such a run is client-bound anyway.

``max_age_ns`` (client workers, Ray shards) also parses what has waited that long,
so records leave the process while it runs and a worker killed hard loses only a
short tail.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

from servelab.loadgen.pacer import Attempt

_now = time.perf_counter_ns

# what one stamped piece costs beyond its bytes: its (t_ns, bytes) tuple, the int,
# the bytes header and its slot in the response's list; and one response beyond its
# pieces: the Response, its headers dict, its Attempt
PIECE_OVERHEAD = 120
RESPONSE_OVERHEAD = 1500


class Digest:
    """``convert(attempt)`` makes the record, ``emit(index, record)`` takes it."""

    def __init__(self, convert, emit, low: int = 16 << 20, ceiling: int = 64 << 20,
                 max_age_ns: int | None = None, slice_ns: int = 200_000) -> None:
        self.convert, self.emit = convert, emit
        self.low, self.ceiling, self.max_age_ns, self.slice_ns = low, ceiling, max_age_ns, slice_ns
        self.pending = 0  # bytes (with overheads) of the raw responses waiting here
        self._todo: deque[Attempt] = deque()
        self._wake: asyncio.Future | None = None

    def push(self, attempt: Attempt) -> None:
        self._todo.append(attempt)
        self.pending += size(attempt)
        while self.pending > self.ceiling and self._todo:
            self.one()
        if self.pending > self.low and self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    async def run(self) -> None:
        """Until cancelled: parse what is due, one slice per turn of the event loop."""
        loop = asyncio.get_running_loop()
        while True:
            if not self._due():
                self._wake = loop.create_future()
                timer = loop.call_later(self.max_age_ns / 2e9, self._poke) if self.max_age_ns else None
                await self._wake
                if timer is not None:
                    timer.cancel()
                continue
            end = _now() + self.slice_ns
            self.one()  # at least one per turn, however short the slice
            while self._due() and _now() < end:
                self.one()
            await asyncio.sleep(0)

    def _poke(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    def _due(self) -> bool:
        if not self._todo:
            return False
        if self.pending > self.low:
            return True
        return self.max_age_ns is not None and _now() - self._todo[0].response.done_ns > self.max_age_ns

    def flush(self) -> None:
        while self._todo:
            self.one()

    def one(self) -> None:
        attempt = self._todo.popleft()
        self.pending -= size(attempt)
        self.emit(attempt.index, self.convert(attempt))


def size(attempt: Attempt) -> int:
    reads = attempt.response.reads
    return sum(len(piece) for _, piece in reads) + PIECE_OVERHEAD * len(reads) + RESPONSE_OVERHEAD
