"""Shared prefixes with fresh suffixes (vLLM's ``prefix_repetition`` dataset):
the workload that shows what a prefix cache is worth.

``num_prefixes`` random prefixes of ``prefix_len`` tokens; each followed by
``num_prompts // num_prefixes`` random suffixes of ``suffix_len`` tokens; the
whole list shuffled. Every prompt's text encodes to exactly its prefix's ids
followed by ``suffix_len`` more, so requests sharing a prefix share it token for
token (vLLM only checks the parts separately; a merge at the seam can break it).
"""

from __future__ import annotations

import numpy as np

from servelab.config import DatasetSpec
from servelab.datasets.random import allowed_tokens, exact_prompts, random_prefix
from servelab.datasets.tokenizer import Tokenizer
from servelab.errors import InputError
from servelab.records import SampleRequest


def sample_prefix_repetition(spec: DatasetSpec, tokenizer: Tokenizer) -> list[SampleRequest]:
    per_prefix = _prompts_per_prefix(spec)
    rng = np.random.default_rng(spec.seed)
    allowed = allowed_tokens(tokenizer)
    prompts: list[tuple[str, list[int]]] = []
    for _ in range(spec.prefix_repetition_num_prefixes):
        prefix = random_prefix(tokenizer, spec.prefix_repetition_prefix_len, allowed, rng)
        suffixes = [_random_ids(allowed, spec.prefix_repetition_suffix_len, rng) for _ in range(per_prefix)]
        prompts += exact_prompts(tokenizer, prefix, suffixes, allowed, rng)
    order = rng.permutation(len(prompts)) if spec.shuffle else range(len(prompts))
    output_len = spec.prefix_repetition_output_len
    return [
        SampleRequest(prompts[k][0], len(prompts[k][1]), output_len, f"{spec.request_id_prefix}{i}")
        for i, k in enumerate(order)
    ]


def _prompts_per_prefix(spec: DatasetSpec) -> int:
    # vLLM makes (num_prompts // num_prefixes) × num_prefixes requests, no top-up.
    if spec.prefix_repetition_num_prefixes < 1:
        raise InputError("--prefix-repetition-num-prefixes must be >= 1")
    if spec.prefix_repetition_prefix_len < 0 or spec.prefix_repetition_suffix_len < 0:
        raise InputError("--prefix-repetition-prefix-len and --prefix-repetition-suffix-len must be >= 0")
    per_prefix = spec.num_prompts // spec.prefix_repetition_num_prefixes
    if per_prefix == 0:
        raise InputError(f"--num-prompts ({spec.num_prompts}) must be >= "
                         f"--prefix-repetition-num-prefixes ({spec.prefix_repetition_num_prefixes})")
    return per_prefix


def _random_ids(allowed: np.ndarray, length: int, rng: np.random.Generator) -> list[int]:
    return allowed[rng.integers(0, len(allowed), size=length)].tolist()
