"""Topping up a dataset that yields fewer requests than asked (vLLM's oversampling)."""

from __future__ import annotations

import random
from array import array
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from servelab.datasets import notes
from servelab.datasets.requests import Requests
from servelab.records import SampleRequest


def oversample(
    requests: list[SampleRequest], wanted: int, prefix: str, seed: int, enabled: bool, source: str
) -> Sequence[SampleRequest]:
    """``requests`` topped up to ``wanted`` by drawing with replacement.

    The copies are vLLM's: Python's ``random`` seeded with the seed, one
    ``choice`` per missing request. They get fresh ids continuing the sequence
    (``prefix + str(len + i)``), as vLLM numbers them, so every id stays unique. Either way, a shortfall is said
    on stderr: a run with fewer or repeated requests must not look like a full one.
    """
    have = len(requests)
    if have >= wanted:
        return requests
    if not enabled:
        note(f"{source}: only {have} of {wanted} requests available; --no-oversample keeps {have}")
        return requests
    rng = random.Random(seed)
    # choice(seq) is seq[randbelow(len(seq))]: choosing from the indices draws the same
    # requests, and the copies are rows of the columns, not 500k new objects
    picks = array("q", (rng.choice(range(have)) for _ in range(wanted - have)))
    note(f"{source}: only {have} of {wanted} requests available; oversampled with replacement to {wanted}")
    columns = Requests.of(requests)
    if columns.numbers is not None and columns.prefix == prefix and np.array_equal(columns.numbers,
                                                                                   np.arange(have)):
        return columns.topped_up(np.frombuffer(picks, np.int64))
    return list(requests) + [replace(requests[k], request_id=f"{prefix}{have + i}") for i, k in enumerate(picks)]


def note(message: str) -> None:
    """One line on stderr, for facts about the sample a user must not miss."""
    notes.say(f"servelab: note: {message}")
