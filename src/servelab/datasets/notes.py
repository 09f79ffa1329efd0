"""Notes about the requests a dataset gave, said once per process.

A tune or a sweep runs many benches in one process over the same dataset; a fact about
the input ("the bundled ShareGPT is a subset", "oversampled to 2,000") does not change
between them, and eighteen copies of it bury the table the user ran for. Every note is
still kept for the prepared-request cache (``collect``), so a later process that reads
the cache instead of sampling says it once too.
"""

from __future__ import annotations

import contextlib
import sys

_said: set[str] = set()
_collectors: list[list[str]] = []


def say(line: str) -> None:
    """Print ``line`` on stderr unless this process already said it; always collect it."""
    for kept in _collectors:
        kept.append(line)
    if line not in _said:
        _said.add(line)
        print(line, file=sys.stderr, flush=True)


@contextlib.contextmanager
def collect():
    """The notes said inside the block, said before or not (for the cache to replay)."""
    kept: list[str] = []
    _collectors.append(kept)
    try:
        yield kept
    finally:
        _collectors.remove(kept)
