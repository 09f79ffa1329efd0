"""Topping up a dataset that yields fewer requests than asked (vLLM's oversampling)."""

from __future__ import annotations

import random
from dataclasses import replace

from servelab.datasets import notes
from servelab.records import SampleRequest


def oversample(
    requests: list[SampleRequest], wanted: int, prefix: str, seed: int, enabled: bool, source: str
) -> list[SampleRequest]:
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
    extra = [replace(rng.choice(requests), request_id=f"{prefix}{have + i}") for i in range(wanted - have)]
    note(f"{source}: only {have} of {wanted} requests available; oversampled with replacement to {wanted}")
    return requests + extra


def note(message: str) -> None:
    """One line on stderr, for facts about the sample a user must not miss."""
    notes.say(f"servelab: note: {message}")
