"""Shared prefixes with fresh suffixes (vLLM's ``prefix_repetition`` dataset):
the workload that shows what a prefix cache is worth.

``num_prefixes`` random prefixes of ``prefix_len`` tokens; each followed by
``num_prompts // num_prefixes`` random suffixes of ``suffix_len`` tokens; the
whole list shuffled. The same prompts as ``vllm bench serve`` for the same seed:

- token ids come from numpy's *legacy* stream ``RandomState(seed)`` (vLLM seeds
  the global one), drawn in vLLM's order — prefix, its fitting, then each suffix and
  its fitting — over the whole base vocabulary; each part is fitted on its own as in
  ``random`` (decode, re-encode, cut or pad, at most 10 corrections);
- the prompt is the text of prefix + suffix ids and ``prompt_len`` their count
  (vLLM does not re-encode the joined text; a merge at the seam can change it);
- the list is shuffled with Python's ``random`` seeded with the seed.

vLLM then draws the send times from that same legacy stream, after these draws:
the sample carries the stream's state (``Sample.arrival_state``) so the schedule
matches too.
"""

from __future__ import annotations

import random

import numpy as np

from servelab.config import DatasetSpec
from servelab.datasets.random import fit_lengths
from servelab.datasets.sample import Sample
from servelab.datasets.tokenizer import Tokenizer
from servelab.errors import InputError
from servelab.records import SampleRequest


def sample_prefix_repetition(spec: DatasetSpec, tokenizer: Tokenizer) -> Sample:
    per_prefix = _prompts_per_prefix(spec)
    rng = np.random.RandomState(spec.seed)
    draw = _legacy_draw(rng, tokenizer.vocab_size)
    parts: list[list[int]] = []
    for _ in range(spec.prefix_repetition_num_prefixes):
        prefix = _random_part(tokenizer, spec.prefix_repetition_prefix_len, draw)
        parts += [prefix + _random_part(tokenizer, spec.prefix_repetition_suffix_len, draw)
                  for _ in range(per_prefix)]
    texts = tokenizer.decode_batch(parts)
    order = list(range(len(parts)))
    if spec.shuffle:
        random.Random(spec.seed).shuffle(order)
    output_len = spec.prefix_repetition_output_len
    requests = [SampleRequest(texts[k], len(parts[k]), output_len, f"{spec.request_id_prefix}{i}")
                for i, k in enumerate(order)]
    return Sample.of(requests, arrival_state=rng.get_state())


def _random_part(tokenizer: Tokenizer, length: int, draw) -> list[int]:
    """``length`` random ids, fitted (one at a time: the next part's draw waits on this fit)."""
    [(_, ids)] = fit_lengths(tokenizer, [draw(length)], [length], draw)
    return ids


def _legacy_draw(rng: np.random.RandomState, vocab_size: int):
    def draw(k: int) -> list[int]:
        return rng.randint(0, vocab_size, size=k).tolist()
    return draw


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
