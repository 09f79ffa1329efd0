"""Datasets (layer 1): turn a DatasetSpec and a tokenizer into SampleRequests.

Each sampler is a function ``(spec, tokenizer) -> list[SampleRequest]`` (a ``Sample``
when it drew from vLLM's arrival stream: datasets/sample.py) with
vLLM's semantics (see each module's docstring); every random draw comes from a
``numpy.random.Generator`` seeded with ``spec.seed``, so a seed names a sample.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable

from servelab.config import DatasetSpec, MultiTurnSpec

from servelab.spec_checks import check_num_prompts
from servelab.datasets import conversations
from servelab.datasets.burstgpt import sample_burstgpt
from servelab.datasets.cache import cached
from servelab.datasets.custom import sample_custom
from servelab.datasets.heap import TRIM_FROM, release_freed
from servelab.datasets.hf import sample_hf
from servelab.datasets.prefix_repetition import sample_prefix_repetition
from servelab.datasets.random import sample_random
from servelab.datasets.sample import Sample
from servelab.datasets.sharegpt import sample_sharegpt
from servelab.datasets.spec_bench import sample_speed_bench, sample_spec_bench
from servelab.datasets.timed_trace import sample_timed_trace
from servelab.datasets.tokenizer import Tokenizer, load_tokenizer
from servelab.errors import InputError
from servelab.records import Conversation, SampleRequest

Sampler = Callable[[DatasetSpec, Tokenizer], list[SampleRequest]]

SAMPLERS: dict[str, Sampler] = {
    "sharegpt": sample_sharegpt,
    "random": sample_random,
    "prefix_repetition": sample_prefix_repetition,
    "custom": sample_custom,
    "burstgpt": sample_burstgpt,
    "timed_trace": sample_timed_trace,
    "spec_bench": sample_spec_bench,
    "speed_bench": sample_speed_bench,
    "hf": sample_hf,
}

# vLLM's datasets that cannot run here, and why (each stops the run with this line).
UNSUPPORTED = {
    "random-rerank": "makes (query, documents) batches for a reranking endpoint; servelab drives "
                     "completions and chat endpoints only",
    "random-mm": "sends images and videos; servelab sends text only and no multimodal model is served here",
    "custom_image": "sends images; servelab sends text only and no multimodal model is served here",
    "custom_audio": "sends audio; servelab sends text only and no audio model is served here",
}

__all__ = ["SAMPLERS", "UNSUPPORTED", "Sample", "Sampler", "Tokenizer", "load_tokenizer", "prepare_requests",
           "sample_conversations", "sample_requests"]


def sample_requests(spec: DatasetSpec, tokenizer: Tokenizer) -> Sample:
    """The requests ``spec`` describes, in the order they will be sent, and the arrival
    stream's state after the dataset's draws (``Sample``)."""
    spec, sampler = _checked(spec)
    return _as_sample(sampler(spec, tokenizer))


def prepare_requests(spec: DatasetSpec, tokenizer: Tokenizer) -> Sample:
    """``sample_requests``, through the prepared-request cache (datasets/cache.py):
    what a run uses, so a repeated run does not tokenize its dataset again."""
    spec, sampler = _checked(spec)
    sample = cached(spec, tokenizer, lambda s, t: _as_sample(sampler(s, t)))
    if len(sample.requests) >= TRIM_FROM:
        release_freed()
    return sample


def _checked(spec: DatasetSpec) -> tuple[DatasetSpec, Sampler]:
    """The spec with its request-id prefix drawn, and its sampler; InputError if none can run."""
    if spec.name in UNSUPPORTED:
        raise InputError(f"--dataset-name {spec.name} is not supported: {UNSUPPORTED[spec.name]}")
    sampler = SAMPLERS.get(spec.name)
    if sampler is None:
        raise InputError(f"--dataset-name {spec.name!r} is not one of {', '.join(SAMPLERS)}")
    check_num_prompts(spec.name, spec.num_prompts)
    return _with_id_prefix(spec), sampler


def sample_conversations(spec: DatasetSpec, multi: MultiTurnSpec, tokenizer: Tokenizer) -> list[Conversation]:
    """The conversations a ``--multi-turn`` run replays (datasets/conversations.py)."""
    return conversations.sample_conversations(_with_id_prefix(spec), multi, tokenizer)


def _with_id_prefix(spec: DatasetSpec) -> DatasetSpec:
    if spec.request_id_prefix is None:  # as vLLM: a fresh prefix per run, so ids never repeat across runs
        spec = dataclasses.replace(spec, request_id_prefix=f"bench-{uuid.uuid4().hex[:8]}-")
    return spec


def _as_sample(requests: list[SampleRequest] | Sample) -> Sample:
    """A sampler returns its requests, or a ``Sample`` when it drew from the arrival stream."""
    return requests if isinstance(requests, Sample) else Sample.of(requests)
