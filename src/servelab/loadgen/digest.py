"""Finished responses → records while the run goes on, off the per-chunk path.

A raw response (its stamped byte pieces) costs ~11 KB for 32 tokens; kept to the end
of a long run they are the run's whole memory, while parsing one (SSE, JSON, token
counts) costs ~0.15 ms of the event loop. The hot path stays as it is: the pacer only
appends a finished attempt here (O(1): at rate inf hundreds of streams end in the same
few milliseconds, and any work per completion there delays their replacements). The
digest's own task then weighs them, one slice of the event loop (``slice_ns``) per
turn, and, cheapest first:

1. Below ``raw_low`` bytes of raw responses nothing happens: a short run parses
   after it ends, as before.
2. Above it the oldest are *packed* as they come: pieces joined and zlib'd (level 1;
   streamed JSON events repeat themselves: ~25× smaller), their stamps in an array.
   ~0.06 ms each, a quarter of a parse: the 512-stream selftest packs, but parses
   nothing before it ends.
3. Above ``packed_low`` bytes of packed ones it parses the oldest, so a chunk
   arriving meanwhile is stamped at most a slice late. Above ``ceiling``, or with
   more than ``MAX_NEW`` not yet weighed (a client too busy to keep up), the work is
   done at once: memory stays bounded, and such a run is client-bound anyway.

``glance`` (loadgen/glance.py: the live panel's) is shown each response as it is
weighed, before any packing: a few microseconds, no parse.

``max_age_ns`` (client workers, Ray shards) also parses what has waited that long,
so records leave the process while it runs and a worker killed hard loses only a
short tail.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from array import array
from collections import deque
from itertools import accumulate

from servelab.loadgen.pacer import Attempt

_now = time.perf_counter_ns

# what one stamped piece costs beyond its bytes: its (t_ns, bytes) tuple, the int,
# the bytes header and its slot in the response's list; and one response beyond its
# pieces: the Response, its headers dict, its Attempt
PIECE_OVERHEAD = 120
RESPONSE_OVERHEAD = 1500
PACKED_OVERHEAD = 400  # a packed one: its Attempt and Response (headers dropped), the tuple, two arrays
# slices per turn while records due by max_age are twice that late (``_behind``): a chunk
# is then stamped at most CATCH_UP slices late, in a client already short of CPU
CATCH_UP = 10
MAX_NEW = 1024  # responses pushed and not yet weighed (~11 MB of 32-token ones)


class Digest:
    """``convert(attempt)`` makes the record, ``emit(index, record)`` takes it."""

    def __init__(self, convert, emit, raw_low: int = 16 << 20, packed_low: int = 8 << 20,
                 ceiling: int = 32 << 20, max_age_ns: int | None = None, slice_ns: int = 200_000,
                 glance=None) -> None:
        self.convert, self.emit, self.glance = convert, emit, glance
        self.raw_low, self.packed_low, self.ceiling = raw_low, packed_low, ceiling
        self.max_age_ns, self.slice_ns = max_age_ns, slice_ns
        self.raw = 0  # bytes (with overheads) of the raw responses weighed
        self.packed = 0  # and of the packed ones
        self._new: deque[Attempt] = deque()  # pushed, not weighed yet (the newest)
        self._raw: deque[Attempt] = deque()
        self._packed: deque[tuple[Attempt, tuple, int]] = deque()  # older than every raw one
        self._wake: asyncio.Future | None = None

    @property
    def pending(self) -> int:
        return self.raw + self.packed

    def push(self, attempt: Attempt) -> None:
        self._new.append(attempt)
        if len(self._new) > MAX_NEW:  # the digest's task is not keeping up
            self._weigh()
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    def _weigh(self) -> None:
        """Take the oldest pushed response into account: pack, or parse, what is over."""
        attempt = self._new.popleft()
        if self.glance is not None:
            self.glance.note(attempt)
        self._raw.append(attempt)
        self.raw += size(attempt)
        while self.raw > self.raw_low:
            self._pack_oldest()
        while self.packed > self.ceiling:
            self.one()

    def _pack_oldest(self) -> None:
        attempt = self._raw.popleft()
        self.raw -= size(attempt)
        packed = pack(attempt)
        n = len(packed[0]) + 16 * len(packed[1]) + PACKED_OVERHEAD
        self._packed.append((attempt, packed, n))
        self.packed += n

    async def run(self) -> None:
        """Until cancelled: weigh what came, parse what is due, one slice per turn of the loop."""
        loop = asyncio.get_running_loop()
        while True:
            if not self._new and not self._due():
                self._wake = loop.create_future()
                timer = loop.call_later(self.max_age_ns / 2e9, self._poke) if self.max_age_ns else None
                await self._wake
                if timer is not None:
                    timer.cancel()
                continue
            end = _now() + self.slice_ns * (CATCH_UP if self._behind() else 1)
            while True:  # at least one step per turn, however short the slice
                if self._new:
                    self._weigh()
                elif self._due():
                    self.one()
                else:
                    break
                if _now() >= end:
                    break
            await asyncio.sleep(0)

    def _behind(self) -> bool:
        """A record due by ``max_age_ns`` is twice that late: the parse has fallen behind (a
        client short of CPU), and a records file waiting on it would lose more to a kill."""
        if self.max_age_ns is None:
            return False
        oldest = next((q[0] for q in (self._packed, self._raw) if q), None)
        oldest = oldest[0] if isinstance(oldest, tuple) else oldest
        return oldest is not None and _now() - oldest.response.done_ns > 2 * self.max_age_ns

    def _poke(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    def _due(self) -> bool:
        if self.packed > self.packed_low:
            return True
        if self.max_age_ns is None:
            return False
        oldest = next((q[0] for q in (self._packed, self._raw, self._new) if q), None)
        oldest = oldest[0] if isinstance(oldest, tuple) else oldest
        return oldest is not None and _now() - oldest.response.done_ns > self.max_age_ns

    def flush(self) -> None:
        if self.glance is not None:  # the panel's last state shows every answered one
            for attempt in self._new:
                self.glance.note(attempt)
        self._raw.extend(self._new)
        self._new.clear()
        while self._packed or self._raw:
            self.one()

    def one(self) -> None:
        """Parse the oldest response waiting here."""
        if self._packed:
            attempt, packed, n = self._packed.popleft()
            self.packed -= n
            attempt.response.reads = unpack(packed)
        elif self._raw:
            attempt = self._raw.popleft()
            self.raw -= size(attempt)
        else:
            attempt = self._new.popleft()
        self.emit(attempt.index, self.convert(attempt))


def size(attempt: Attempt) -> int:
    reads = attempt.response.reads
    return sum(len(piece) for _, piece in reads) + PIECE_OVERHEAD * len(reads) + RESPONSE_OVERHEAD


def pack(attempt: Attempt) -> tuple[bytes, array, array]:
    """The response's pieces as (zlib'd body, stamps, piece ends); its pieces and headers go."""
    resp = attempt.response
    reads = resp.reads
    packed = (zlib.compress(b"".join(piece for _, piece in reads), 1), array("q", [t for t, _ in reads]),
              array("q", accumulate(len(piece) for _, piece in reads)))
    resp.reads, resp.headers = [], {}
    return packed


def unpack(packed: tuple[bytes, array, array]) -> list[tuple[int, bytes]]:
    body, stamps, ends = packed
    data = zlib.decompress(body)
    return [(t, data[a:b]) for t, a, b in zip(stamps, (0, *ends[:-1]), ends)]
