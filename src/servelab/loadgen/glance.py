"""What the live panel shows of each answered request, read off its raw response without parsing it.

A record (loadgen/digest.py) costs ~0.15 ms of the event loop to make: SSE, JSON, the token
count. Made during a run for the panel's sake, that moved the client's own figures
(docs/design.md, "The live panel's cost"). A glance costs a few microseconds and is taken
in the digest's task, off the pacer's path:

- TTFT: the stamp of the first body piece carrying a ``"choices":[{`` event that is not only
  a chat role announcement, minus the send — the record's TTFT, where the piece's first such
  event bears a token. The result's figure comes from the record, made after the run: the
  panel's can differ for a chat event with an empty delta that is not a role (none in
  vLLM's or the mock's streams) or a ``"choices"`` text inside a token.
- which answered: a 200 with such an event. A stream that then ends in an error event or
  closes mid-way is a failure in the record and the result, an answer on the panel.
- output tokens: the usage block's ``completion_tokens`` (servelab always asks for it),
  read from the last pieces; without one, the number of events with choices (one token
  each at vLLM's default stream interval).

The columns are numpy arrays indexed by the request; the panel reads them from its thread.
"""

from __future__ import annotations

import re

import numpy as np

from servelab.loadgen.pacer import Attempt

CHOICES = b'"choices":[{'
SPACED = b'"choices": [{'  # a server whose JSON has spaces after its separators
ROLE, ROLE_SPACED = b'"role":', b'"role": '
_USAGE = re.compile(rb'"completion_tokens":\s*(\d+)')
TAIL_PIECES = 3  # pieces from the end searched for the usage block
OK, FAILED = 1, 2


class Glance:
    """``note(attempt)`` for each answered one; ``state``: 0 not yet, OK, FAILED."""

    def __init__(self, n: int) -> None:
        self.state = np.zeros(n, dtype=np.uint8)
        self.ttft_ms = np.zeros(n, dtype=np.float32)
        self.tokens = np.zeros(n, dtype=np.int32)

    def note(self, attempt: Attempt) -> None:
        resp, i = attempt.response, attempt.index
        if resp is None or resp.error or resp.status != 200 or not attempt.sent_ns:
            self.state[i] = FAILED
            return
        reads = resp.reads
        first = next((t for t, piece in reads if _bears_choices(piece)), None)
        if first is None:
            self.state[i] = FAILED
            return
        self.ttft_ms[i] = (first - attempt.sent_ns) / 1e6
        self.tokens[i] = output_tokens(reads)
        self.state[i] = OK  # last: the panel reads a row once its state says it is there

    def columns(self) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
        """(requests noted, the OK ones' indices, TTFT ms by request, output tokens by request)."""
        state = self.state
        return int(np.count_nonzero(state)), np.flatnonzero(state == OK), self.ttft_ms, self.tokens


def _bears_choices(piece: bytes) -> bool:
    """An event with choices that is not only a chat stream's role announcement (vLLM's first
    chat event, ``"delta":{"role":"assistant","content":""}``, which the record's TTFT skips)."""
    return _token_events(piece) > 0


def _token_events(piece: bytes) -> int:
    """Events with choices in ``piece``, less the chat role announcements among them."""
    events = piece.count(CHOICES) + piece.count(SPACED)
    return max(events - piece.count(ROLE) - piece.count(ROLE_SPACED), 0) if events else 0


def output_tokens(reads: list[tuple[int, bytes]]) -> int:
    """``completion_tokens`` of the usage block in the last pieces (joined, so a split one is
    found), else the count of events with choices."""
    tail = b"".join(piece for _, piece in reads[-TAIL_PIECES:])
    found = None
    for found in _USAGE.finditer(tail):
        pass
    if found is not None:
        return int(found.group(1))
    return sum(_token_events(piece) for _, piece in reads)
