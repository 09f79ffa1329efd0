"""Synthetic prompts of exact token lengths (vLLM's ``random`` dataset).

Lengths, drawn in vLLM's order from ``default_rng(seed)`` so one seed gives the
same lengths as ``vllm bench serve``::

    real_in = input_len − (special tokens the tokenizer adds, e.g. a BOS)
    input  ~ U{⌊real_in·(1−r)⌋ … ⌈real_in·(1+r)⌉}      (integers, both ends)
    output ~ U{max(1, ⌊out·(1−r)⌋) … max(1, ⌈out·(1+r)⌉)}
    offset ~ U{0 … vocab−1}

Prompt i is ``prefix + allowed[(offset_i + i + k) mod |allowed|]`` for k < input_i,
where ``allowed`` is the vocabulary without special tokens and ``prefix`` is one
shared run of ``random_prefix_len`` random tokens; ``prompt_len = prefix_len + input_i``.

Decoding token ids and re-encoding the text does not give the same ids back (byte
pieces, merges across the seam), so each prompt is decoded, re-encoded, trimmed or
padded and tried again until the text encodes to exactly the target length *and*
starts with the prefix's exact ids, so a server's prefix cache sees one prefix.
"""

from __future__ import annotations

import math

import numpy as np

from servelab.config import DatasetSpec
from servelab.datasets.tokenizer import Tokenizer
from servelab.errors import DatasetError, InputError
from servelab.records import SampleRequest

MAX_ROUNDS = 40  # with Qwen3 most prompts settle in 2–3 rounds, the worst seen in 8; 40 means a bug
REDRAW_AFTER = 8  # rounds before a stubborn body is replaced by fresh random tokens


def sample_random(spec: DatasetSpec, tokenizer: Tokenizer) -> list[SampleRequest]:
    rng = np.random.default_rng(spec.seed)
    input_lens, output_lens, offsets = draw_lengths(spec, tokenizer, rng)
    allowed = allowed_tokens(tokenizer)
    prefix = random_prefix(tokenizer, spec.random_prefix_len, allowed, rng)
    bodies = [
        allowed[(int(offsets[i]) + i + np.arange(int(n))) % len(allowed)].tolist() for i, n in enumerate(input_lens)
    ]
    prompts = exact_prompts(tokenizer, prefix, bodies, allowed, rng)
    return [
        SampleRequest(text, len(ids), int(output_lens[i]), f"{spec.request_id_prefix}{i}")
        for i, (text, ids) in enumerate(prompts)
    ]


def draw_lengths(
    spec: DatasetSpec, tokenizer: Tokenizer, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(input lengths without the prefix, output lengths, vocabulary offsets)."""
    in_ratio = spec.random_range_ratio
    out_ratio = in_ratio if spec.random_output_range_ratio is None else spec.random_output_range_ratio
    for ratio in (in_ratio, out_ratio):
        if not 0.0 <= ratio < 1.0:
            raise InputError(f"--random-range-ratio must be in [0, 1), got {ratio}")
    if spec.random_prefix_len < 0:
        raise InputError(f"--random-prefix-len must be >= 0, got {spec.random_prefix_len}")
    real_in = max(0, spec.random_input_len - tokenizer.num_special_tokens)
    in_low, in_high = math.floor(real_in * (1 - in_ratio)), math.ceil(real_in * (1 + in_ratio))
    if spec.random_prefix_len + in_low < 1:
        raise InputError(
            f"--random-input-len {spec.random_input_len} is too small: with --random-range-ratio {in_ratio} "
            f"and {tokenizer.num_special_tokens} special tokens a prompt could have 0 tokens"
        )
    out_low = max(1, math.floor(spec.random_output_len * (1 - out_ratio)))
    out_high = max(1, math.ceil(spec.random_output_len * (1 + out_ratio)))
    n = spec.num_prompts
    return (rng.integers(in_low, in_high + 1, size=n), rng.integers(out_low, out_high + 1, size=n),
            rng.integers(0, tokenizer.vocab_size, size=n))


def allowed_tokens(tokenizer: Tokenizer) -> np.ndarray:
    """Base-vocabulary ids that are not special tokens (a random prompt must not
    contain an end-of-sequence or chat-marker token)."""
    return np.setdiff1d(np.arange(tokenizer.vocab_size), np.fromiter(tokenizer.special_ids, dtype=np.int64))


def random_prefix(tokenizer: Tokenizer, length: int, allowed: np.ndarray, rng: np.random.Generator) -> list[int]:
    """Token ids of ``length`` random tokens whose text encodes back to exactly them."""
    if length <= 0:
        return []
    draw = allowed[rng.integers(0, len(allowed), size=length)].tolist()
    [(_, ids)] = exact_prompts(tokenizer, [], [draw], allowed, rng)
    return ids


def exact_prompts(
    tokenizer: Tokenizer, prefix: list[int], bodies: list[list[int]], allowed: np.ndarray, rng: np.random.Generator
) -> list[tuple[str, list[int]]]:
    """For each body, (text, ids) with ``encode(text) == ids``, ``ids`` starting
    with ``prefix`` and ``len(ids) == len(prefix) + len(body)``.

    All unfinished prompts go through one batched decode/encode per round.
    """
    targets = [len(prefix) + len(body) for body in bodies]
    current = [prefix + body for body in bodies]
    done: list[tuple[str, list[int]] | None] = [None] * len(bodies)
    pending = list(range(len(bodies)))
    for round_ in range(MAX_ROUNDS):
        texts = tokenizer.decode_batch([current[i] for i in pending])
        encoded = tokenizer.encode_batch(texts, add_special_tokens=False)
        retry = []
        for i, text, ids in zip(pending, texts, encoded):
            if len(ids) == targets[i] and ids[: len(prefix)] == prefix:
                done[i] = (text, ids)
            else:
                current[i] = prefix + _refit(current[i], ids, len(prefix), targets[i], allowed, rng, round_)
                retry.append(i)
        if not (pending := retry):
            return done  # type: ignore[return-value]
    raise DatasetError(f"could not build {len(pending)} prompt(s) of exactly the asked token length "
                       f"in {MAX_ROUNDS} decode/re-encode rounds with tokenizer {tokenizer.name}")


def _refit(
    tried: list[int], got: list[int], prefix_len: int, target: int, allowed: np.ndarray,
    rng: np.random.Generator, round_: int,
) -> list[int]:
    """The next body to try after ``tried`` re-encoded to ``got``.

    When the prefix survived, keep what the tokenizer made of the body (vLLM's
    way); when it merged with the body, change the body's first token so the
    seam differs. Stubborn cases start over from fresh random tokens.
    """
    body_len = target - prefix_len
    if (round_ + 1) % REDRAW_AFTER == 0:
        body = []
    elif got[:prefix_len] == tried[:prefix_len]:
        body = got[prefix_len:target]
    else:
        body = tried[prefix_len:target]
        if body:
            body[0] = int(allowed[rng.integers(0, len(allowed))])
    missing = body_len - len(body)
    return body + (allowed[rng.integers(0, len(allowed), size=missing)].tolist() if missing > 0 else [])
