"""Conversations for multi-turn runs (``--multi-turn``), from ShareGPT or a custom JSONL file.

ShareGPT: each record's ``conversations`` list, each turn's ``from`` read as the user
(``human``, ``user``) or the assistant (``gpt``, ``chatgpt``, ``bing``, ``bard``,
``assistant``). Turns before the first user turn are skipped (about a third of the
ShareGPT split starts with a reply: the tail of a longer chat; a few start with
``system``); from there the record is read as (user, assistant) pairs and ends at the
first pair that does not alternate. A turn is the user's message; its output length is
the reference reply's tokens, or ``--sharegpt-output-len``. Records with fewer than two
turns are not conversations and are skipped. A conversation is cut before the first turn
whose prompt would exceed ``--sharegpt-max-prompt-len`` or whose prompt plus output would
exceed ``--sharegpt-max-total-len``, the prompt counted as every earlier user message and
reference reply plus its own message — an upper bound on what is sent, since a reply
never exceeds its max_tokens (the chat template's few tokens per message aside).

Custom JSONL, one conversation per line (``id`` optional)::

    {"id": "c1", "turns": ["first user message", "second user message"]}
    {"turns": [{"prompt": "Hi", "output_tokens": 32}, {"prompt": "And then?", "output_tokens": 8}]}

Each turn's output length is ``--custom-output-len``, or its ``output_tokens`` when that is
-1. No length limit is applied: the file is the user's own workload.

Both: ``--multi-turn-max-turns`` keeps each conversation's first N turns; conversations
are shuffled with the seed (ShareGPT in vLLM's order), ``--num-prompts`` counts
conversations, and a short file is topped up by drawing with replacement (fresh ids).
"""

from __future__ import annotations

import numpy as np

from servelab.config import DatasetSpec, MultiTurnSpec
from servelab.datasets.files import load_json_list, load_jsonl
from servelab.datasets.oversample import note
from servelab.datasets.sharegpt import vllm_shuffle_order
from servelab.datasets.tokenizer import Tokenizer
from servelab.errors import DatasetError
from servelab.records import Conversation, SampleRequest

USER_ROLES = frozenset({"human", "user"})
ASSISTANT_ROLES = frozenset({"gpt", "chatgpt", "bing", "bard", "assistant"})

# (user message, reference reply or None, output length or None) of one turn, before tokenizing
RawTurn = tuple[str, str | None, int | None]


def sample_conversations(spec: DatasetSpec, multi: MultiTurnSpec, tokenizer: Tokenizer) -> list[Conversation]:
    if spec.name not in ("sharegpt", "custom"):
        raise DatasetError(f"--multi-turn needs --dataset-name sharegpt or custom, not {spec.name}")
    if spec.path is None:
        raise DatasetError(f"--dataset-path is required for --multi-turn with --dataset-name {spec.name}")
    if spec.name == "sharegpt":
        kept = _sharegpt(spec, multi, tokenizer)
    else:
        kept = _custom(spec, multi, tokenizer)
    wanted = spec.num_prompts if spec.num_prompts > 0 else len(kept)
    return _top_up(kept, wanted, spec, np.random.default_rng(spec.seed))


def sharegpt_dialogues(records: list, path: str) -> list[list[RawTurn]]:
    """Every record's (user, reply) pairs, read as the module docstring says."""
    dialogues = []
    for index, entry in enumerate(records):
        turns = entry.get("conversations") if isinstance(entry, dict) else None
        if not isinstance(turns, list):
            raise DatasetError(f"{path}: record {index} has no 'conversations' list")
        pairs = _pairs(turns)
        if len(pairs) >= 2:
            dialogues.append(pairs)
    return dialogues


def _pairs(turns: list) -> list[RawTurn]:
    roles = [t.get("from") if isinstance(t, dict) else None for t in turns]
    start = next((i for i, r in enumerate(roles) if r in USER_ROLES), len(turns))
    pairs: list[RawTurn] = []
    for i in range(start, len(turns) - 1, 2):
        user, reply = turns[i].get("value"), turns[i + 1].get("value")
        if roles[i] not in USER_ROLES or roles[i + 1] not in ASSISTANT_ROLES \
                or not isinstance(user, str) or not isinstance(reply, str):
            break
        pairs.append((user, reply, None))
    return pairs


def _sharegpt(spec: DatasetSpec, multi: MultiTurnSpec, tokenizer: Tokenizer) -> list[list[tuple[str, int, int]]]:
    dialogues = [d[: multi.max_turns] for d in sharegpt_dialogues(load_json_list(spec.path), spec.path)]
    order = vllm_shuffle_order(len(dialogues), spec.seed) if spec.shuffle else list(range(len(dialogues)))
    kept: list[list[tuple[str, int, int]]] = []
    start = 0
    while start < len(order) and len(kept) < spec.num_prompts:
        size = max(16, 2 * (spec.num_prompts - len(kept)))  # tokenize only what may be needed
        batch = [dialogues[i] for i in order[start:start + size]]
        start += size
        for turns in _measure(batch, spec, tokenizer):
            turns = _fit(turns, spec)
            if len(turns) >= 2 and len(kept) < spec.num_prompts:
                kept.append(turns)
    if not kept:
        raise DatasetError(f"{spec.path}: no conversation with at least 2 turns fits the ShareGPT limits "
                           f"(--sharegpt-max-prompt-len {spec.sharegpt_max_prompt_len}, "
                           f"--sharegpt-max-total-len {spec.sharegpt_max_total_len})")
    return kept


def _measure(batch: list[list[RawTurn]], spec: DatasetSpec, tokenizer: Tokenizer) -> list[list[tuple[str, int, int]]]:
    """(message, its tokens, output length) for every turn of every conversation in ``batch``."""
    users = [u for turns in batch for u, _, _ in turns]
    user_lens = [len(ids) for ids in tokenizer.encode_batch(users, add_special_tokens=True)]
    if spec.sharegpt_output_len is not None:
        out_lens = [spec.sharegpt_output_len] * len(users)
    else:
        replies = [r or "" for turns in batch for _, r, _ in turns]
        out_lens = [len(ids) for ids in tokenizer.encode_batch(replies, add_special_tokens=True)]
    flat = list(zip(users, user_lens, out_lens))
    measured, at = [], 0
    for turns in batch:
        measured.append(flat[at:at + len(turns)])
        at += len(turns)
    return measured


def _fit(turns: list[tuple[str, int, int]], spec: DatasetSpec) -> list[tuple[str, int, int]]:
    """The turns before the first one whose estimated prompt or prompt + output is too long."""
    context = 0
    for k, (_, user_len, out_len) in enumerate(turns):
        prompt = context + user_len
        if prompt > spec.sharegpt_max_prompt_len or prompt + out_len > spec.sharegpt_max_total_len:
            return turns[:k]
        context = prompt + out_len
    return turns


def _custom(spec: DatasetSpec, multi: MultiTurnSpec, tokenizer: Tokenizer) -> list[list[tuple[str, int, int]]]:
    rows = [_custom_row(spec, number, row)[: multi.max_turns] for number, row in load_jsonl(spec.path)]
    if not rows:
        raise DatasetError(f"{spec.path}: no conversations (the file has no non-blank line)")
    if spec.shuffle:
        rows = [rows[k] for k in np.random.default_rng(spec.seed).permutation(len(rows))]
    users = [u for turns in rows for u, _ in turns]
    lens = iter([len(ids) for ids in tokenizer.encode_batch(users, add_special_tokens=True)])
    return [[(u, next(lens), out) for u, out in turns] for turns in rows]


def _custom_row(spec: DatasetSpec, number: int, row: object) -> list[tuple[str, int]]:
    """(message, output length) of each turn of one line; errors name ``file:line``."""
    where = f"{spec.path}:{number}"
    turns = row.get("turns") if isinstance(row, dict) else None
    if not isinstance(turns, list) or not turns:
        raise DatasetError(f"{where}: --multi-turn expects each line to be an object with a non-empty "
                           "list 'turns' (strings, or objects with 'prompt' and 'output_tokens')")
    return [_custom_turn(spec, f"{where}: turn {k}", t) for k, t in enumerate(turns)]


def _custom_turn(spec: DatasetSpec, where: str, turn: object) -> tuple[str, int]:
    prompt = turn.get("prompt") if isinstance(turn, dict) else turn
    if not isinstance(prompt, str):
        raise DatasetError(f"{where}: must be a string or an object with a string field 'prompt'")
    if spec.custom_output_len != -1:
        return prompt, spec.custom_output_len
    output = turn.get("output_tokens") if isinstance(turn, dict) else None
    if not isinstance(output, int) or isinstance(output, bool) or output < 1:
        raise DatasetError(f"{where}: 'output_tokens' must be a positive integer when "
                           f"--custom-output-len is -1 (got {output!r})")
    return prompt, output


def _top_up(kept: list[list[tuple[str, int, int]]], wanted: int, spec: DatasetSpec,
            rng: np.random.Generator) -> list[Conversation]:
    """The first ``wanted`` conversations, topped up by drawing with replacement when short."""
    picks = list(range(min(wanted, len(kept))))
    if len(kept) < wanted:
        if spec.oversample:
            picks += [int(p) for p in rng.integers(0, len(kept), size=wanted - len(kept))]
        how = "oversampled with replacement" if spec.oversample else "--no-oversample keeps them"
        note(f"{spec.name} {spec.path}: only {len(kept)} of {wanted} conversations available; {how}")
    return [_conversation(f"{spec.request_id_prefix}{i}", kept[p]) for i, p in enumerate(picks)]


def _conversation(cid: str, turns: list[tuple[str, int, int]]) -> Conversation:
    return Conversation(cid, tuple(SampleRequest(text, n, out, f"{cid}-{k}")
                                   for k, (text, n, out) in enumerate(turns)))
