"""Your own prompts from a JSON Lines file (vLLM's ``custom`` dataset)::

    {"prompt": "What is the capital of India?", "output_tokens": 10}

As in vLLM: ``--custom-output-len`` (default 256) sets every output length unless
it is -1, in which case each line's ``output_tokens`` does; each prompt is wrapped
in the tokenizer's chat template (one user turn plus the generation prompt) unless
``--skip-chat-template``; ``prompt_len`` counts the text as sent; lines are
shuffled with the seed; ``--num-prompts`` ≤ 0 takes every line.
"""

from __future__ import annotations

import random

from servelab.config import DatasetSpec
from servelab.datasets.files import load_jsonl
from servelab.datasets.oversample import oversample
from servelab.datasets.tokenizer import Tokenizer
from servelab.errors import DatasetError
from servelab.records import SampleRequest


def sample_custom(spec: DatasetSpec, tokenizer: Tokenizer) -> list[SampleRequest]:
    if spec.path is None:
        raise DatasetError("--dataset-path is required for --dataset-name custom (a .jsonl file)")
    rows = [_parse_row(spec, number, row) for number, row in load_jsonl(spec.path)]
    return prompt_requests(spec, tokenizer, rows, f"custom {spec.path}")


def prompt_requests(spec: DatasetSpec, tokenizer: Tokenizer, rows: list[tuple[str, int]],
                    source: str) -> list[SampleRequest]:
    """Requests from (prompt, output length) rows, the way vLLM's custom dataset makes
    them (and its spec_bench and speed_bench, built on it): shuffled, cut to
    --num-prompts, wrapped in the chat template, counted, topped up."""
    if not rows:
        raise DatasetError(f"{source}: no requests (no usable line)")
    if spec.shuffle:  # vLLM's order: Python's random seeded with the seed shuffles the lines
        random.Random(spec.seed).shuffle(rows)
    wanted = spec.num_prompts if spec.num_prompts > 0 else len(rows)
    rows = rows[:wanted]
    kwargs = dict(spec.chat_template_kwargs)
    prompts = [p if spec.skip_chat_template else tokenizer.apply_chat_template(p, **kwargs) for p, _ in rows]
    lens = [len(ids) for ids in tokenizer.encode_batch(prompts, add_special_tokens=True)]
    requests = [
        SampleRequest(prompt, n, output, f"{spec.request_id_prefix}{i}")
        for i, (prompt, n, (_, output)) in enumerate(zip(prompts, lens, rows))
    ]
    return oversample(requests, wanted, spec.request_id_prefix, spec.seed, spec.oversample, source)


def _parse_row(spec: DatasetSpec, number: int, row: object) -> tuple[str, int]:
    """(prompt, output length) of one line; errors name ``file:line`` and the field."""
    where = f"{spec.path}:{number}"
    if not isinstance(row, dict) or not isinstance(row.get("prompt"), str):
        raise DatasetError(f"{where}: each line must be an object with a string field 'prompt'")
    if spec.custom_output_len != -1:
        return row["prompt"], spec.custom_output_len
    output = row.get("output_tokens")
    # bool is an int in Python; "output_tokens": true is a mistake, not 1.
    if not isinstance(output, int) or isinstance(output, bool) or output < 1:
        raise DatasetError(f"{where}: field 'output_tokens' must be a positive integer when "
                           f"--custom-output-len is -1 (got {output!r})")
    return row["prompt"], output
