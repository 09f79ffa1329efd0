"""Synthetic prompts of given token lengths (vLLM's ``random`` dataset), the same
prompts ``vllm bench serve`` makes for the same flags and seed.

Every draw comes from ``default_rng(seed)``, in vLLM's order::

    real_in = input_len − (special tokens the tokenizer adds, e.g. a BOS)
    input  ~ U{⌊real_in·(1−r)⌋ … ⌈real_in·(1+r)⌉}      (integers, both ends)
    output ~ U{max(1, ⌊out·(1−r)⌋) … max(1, ⌈out·(1+r)⌉)}
    offset ~ U{0 … vocab−1}
    prefix = random_prefix_len draws from ``allowed``, then fitted (below)

Prompt i is ``prefix + allowed[(offset_i + i + k) mod |allowed|]`` for k < input_i,
where ``allowed`` is the vocabulary without special tokens.

Decoding ids and re-encoding the text does not give the same ids back (byte
pieces, merges across a seam), so each sequence is *fitted* as vLLM fits it: decode,
re-encode; too long → cut to the target; too short → append random ids drawn from the
same generator; at most 10 corrections, after which the prompt keeps the length it
has. The prompt is the last decoded text and ``prompt_len`` the length of its
re-encoding, so ``prompt_len`` is always what the text encodes to. vLLM does not
promise that a shared prefix survives the seam token for token; neither does this.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from servelab.config import DatasetSpec
from servelab.datasets import notes
from servelab.datasets.requests import Builder, Requests
from servelab.datasets.tokenizer import Tokenizer
from servelab.errors import InputError
from servelab.records import SampleRequest

MAX_FIXES = 10  # vLLM's max_retry: corrections before a prompt keeps its length as is

Draw = Callable[[int], list[int]]  # k random token ids, from the sampler's own generator


# sequences fitted at a time: the token lists and texts of a fitting are Python objects
# (~1.5 KB a 16-token prompt, all told); 500,000 at once peaked near 2 GB
CHUNK = 8192


def sample_random(spec: DatasetSpec, tokenizer: Tokenizer) -> Requests:
    rng = np.random.default_rng(spec.seed)
    input_lens, output_lens, offsets = draw_lengths(spec, tokenizer, rng)
    allowed = allowed_tokens(tokenizer)
    draw = _generator_draw(rng, tokenizer.vocab_size)
    prefix = random_prefix(tokenizer, spec.random_prefix_len, allowed, rng, draw)
    built, missed = Builder(share=False), 0
    # Fitting draws from the generator only for sequences that re-encode short, in index
    # order (fit_lengths); chunks in index order keep that order, so the prompts are the same.
    for lo in range(0, len(input_lens), CHUNK):
        chunk = range(lo, min(lo + CHUNK, len(input_lens)))
        seqs = [prefix + allowed[(int(offsets[i]) + i + np.arange(int(input_lens[i]))) % len(allowed)].tolist()
                for i in chunk]
        # vLLM's target counts the asked prefix length, even if fitting the prefix missed it
        targets = [spec.random_prefix_len + int(input_lens[i]) for i in chunk]
        prompts = fit_lengths(tokenizer, seqs, targets, draw, warn=False)
        missed += sum(1 for (_, ids), t in zip(prompts, targets) if len(ids) != t)
        for i, (text, ids) in zip(chunk, prompts):
            built.add(SampleRequest(text, len(ids), int(output_lens[i]), f"{spec.request_id_prefix}{i}"))
    _warn_mismatch(missed)
    return built.build()


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
    """Base-vocabulary ids that are not special tokens, ascending (a random prompt
    must not contain an end-of-sequence or chat-marker token)."""
    return np.setdiff1d(np.arange(tokenizer.vocab_size), np.fromiter(tokenizer.special_ids, dtype=np.int64))


def random_prefix(tokenizer: Tokenizer, length: int, allowed: np.ndarray, rng: np.random.Generator,
                  draw: Draw) -> list[int]:
    """Token ids of ``length`` random tokens, fitted so their text encodes back to them."""
    if length <= 0:
        return []
    ids = allowed[rng.integers(0, len(allowed), size=length)].tolist()
    [(_, fitted)] = fit_lengths(tokenizer, [ids], [length], draw)
    return fitted


def fit_lengths(tokenizer: Tokenizer, seqs: list[list[int]], targets: list[int],
                draw: Draw, warn: bool = True) -> list[tuple[str, list[int]]]:
    """(text, ids) per sequence after vLLM's fitting (module docstring); ``encode(text) == ids``.

    Same results as fitting one sequence after another, faster: sequences are
    decoded and re-encoded in batches while they need no random ids; a sequence
    that does is set aside and finished later, in order, so the generator hands
    out its ids in the same order as vLLM's one-at-a-time loop.
    """
    done: list[tuple[str, list[int]] | None] = [None] * len(seqs)
    fixes_left = [MAX_FIXES] * len(seqs)
    current = [list(s) for s in seqs]
    pending, short = list(range(len(seqs))), []
    while pending:
        texts = tokenizer.decode_batch([current[i] for i in pending])
        encoded = tokenizer.encode_batch(texts, add_special_tokens=False)
        retry = []
        for i, text, ids in zip(pending, texts, encoded):
            if fixes_left[i] <= 0 or len(ids) == targets[i]:
                done[i] = (text, ids)
            elif len(ids) > targets[i]:
                current[i], fixes_left[i] = ids[: targets[i]], fixes_left[i] - 1
                retry.append(i)
            else:
                current[i] = ids
                short.append(i)
        pending = retry
    for i in sorted(short):
        done[i] = _fit_one(tokenizer, current[i], targets[i], fixes_left[i], draw)
    if warn:
        _warn_mismatch(sum(1 for (_, ids), t in zip(done, targets) if len(ids) != t))
    return done  # type: ignore[return-value]


def _fit_one(tokenizer: Tokenizer, ids: list[int], target: int, fixes_left: int, draw: Draw) -> tuple[str, list[int]]:
    """Finish fitting ``ids``, which just re-encoded short of ``target``."""
    while True:
        if len(ids) < target:
            ids = ids + draw(target - len(ids))
        else:
            ids = ids[:target]
        fixes_left -= 1
        text = tokenizer.decode(ids)
        ids = tokenizer.encode(text, add_special_tokens=False)
        if fixes_left <= 0 or len(ids) == target:
            return text, ids


def _warn_mismatch(off: int) -> None:
    if off:
        notes.say(f"servelab: note: {off} prompt(s) still differ from their target length after "
                  f"{MAX_FIXES} decode/re-encode corrections (as in vLLM); prompt_len counts what is sent")


def _generator_draw(rng: np.random.Generator, vocab_size: int) -> Draw:
    # vLLM pads from the whole base vocabulary, not only ``allowed``
    return lambda k: rng.integers(0, vocab_size, size=k).tolist()
