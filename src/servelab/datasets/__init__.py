"""Datasets (layer 1): turn a DatasetSpec and a tokenizer into SampleRequests.

Each sampler is a function ``(spec, tokenizer) -> list[SampleRequest]`` with
vLLM's semantics (see each module's docstring); every random draw comes from a
``numpy.random.Generator`` seeded with ``spec.seed``, so a seed names a sample.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable

from servelab.config import DatasetSpec, MultiTurnSpec
from servelab.datasets import conversations
from servelab.datasets.custom import sample_custom
from servelab.datasets.prefix_repetition import sample_prefix_repetition
from servelab.datasets.random import sample_random
from servelab.datasets.sharegpt import sample_sharegpt
from servelab.datasets.tokenizer import Tokenizer, load_tokenizer
from servelab.errors import InputError
from servelab.records import Conversation, SampleRequest

Sampler = Callable[[DatasetSpec, Tokenizer], list[SampleRequest]]

SAMPLERS: dict[str, Sampler] = {
    "sharegpt": sample_sharegpt,
    "random": sample_random,
    "prefix_repetition": sample_prefix_repetition,
    "custom": sample_custom,
}

__all__ = ["SAMPLERS", "Sampler", "Tokenizer", "load_tokenizer", "sample_conversations", "sample_requests"]


def sample_requests(spec: DatasetSpec, tokenizer: Tokenizer) -> list[SampleRequest]:
    """The requests ``spec`` describes, in the order they will be sent."""
    sampler = SAMPLERS.get(spec.name)
    if sampler is None:
        raise InputError(f"--dataset-name {spec.name!r} is not one of {', '.join(SAMPLERS)}")
    # custom alone reads "≤ 0" as "every line", as vLLM does.
    if spec.num_prompts < 1 and spec.name != "custom":
        raise InputError(f"--num-prompts must be >= 1, got {spec.num_prompts}")
    return sampler(_with_id_prefix(spec), tokenizer)


def sample_conversations(spec: DatasetSpec, multi: MultiTurnSpec, tokenizer: Tokenizer) -> list[Conversation]:
    """The conversations a ``--multi-turn`` run replays (datasets/conversations.py)."""
    return conversations.sample_conversations(_with_id_prefix(spec), multi, tokenizer)


def _with_id_prefix(spec: DatasetSpec) -> DatasetSpec:
    if spec.request_id_prefix is None:  # as vLLM: a fresh prefix per run, so ids never repeat across runs
        spec = dataclasses.replace(spec, request_id_prefix=f"bench-{uuid.uuid4().hex[:8]}-")
    return spec
