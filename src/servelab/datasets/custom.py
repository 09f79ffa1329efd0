"""Your own prompts from a JSON Lines file (vLLM's ``custom`` dataset)::

    {"prompt": "What is the capital of India?", "output_tokens": 10}
    {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
                  {"role": "user", "content": "And the capital of India?"}]}

As in vLLM: ``--custom-output-len`` (default 256) sets every output length unless
it is -1, in which case each line's ``output_tokens`` does; each prompt is wrapped
in the tokenizer's chat template (one user turn plus the generation prompt) unless
``--skip-chat-template``; ``prompt_len`` counts the text as sent; lines are
shuffled with the seed; ``--num-prompts`` ≤ 0 takes every line.

A ``messages`` line (servelab's; a quality task's conversation) is one request of the whole
conversation: a chat endpoint is sent the messages as they are (``conversations`` maps the
prompt to them; loadgen/payloads.py), a completions endpoint their rendering by the chat
template. With ``--skip-chat-template`` the prompt counted is the turns as plain
``role: content`` lines, which only a chat endpoint may be sent (``conversations`` says so).
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
    prompts = [as_sent(spec, tokenizer, p) for p, _ in rows]
    lens = [len(ids) for ids in tokenizer.encode_batch(prompts, add_special_tokens=True)]
    requests = [
        SampleRequest(prompt, n, output, f"{spec.request_id_prefix}{i}")
        for i, (prompt, n, (_, output)) in enumerate(zip(prompts, lens, rows))
    ]
    return oversample(requests, wanted, spec.request_id_prefix, spec.seed, spec.oversample, source)


def as_sent(spec: DatasetSpec, tokenizer: Tokenizer, prompt: str | tuple[dict, ...]) -> str:
    """A line's prompt as counted and (to a completions endpoint) sent: in the chat template unless skipped."""
    if spec.skip_chat_template:
        return prompt if isinstance(prompt, str) else "\n".join(f"{m['role']}: {m['content']}" for m in prompt)
    return tokenizer.apply_chat_template(prompt if isinstance(prompt, str) else list(prompt),
                                         **dict(spec.chat_template_kwargs))


def conversations(spec: DatasetSpec, tokenizer: Tokenizer, kind: str) -> dict[str, list[dict]]:
    """{prompt as sent: its messages} for the ``messages`` lines, which a chat endpoint is sent
    whole; read again after sampling (a small file: quality tasks). Empty on a completions
    endpoint, where the prompt is the conversation in the chat template — not without it."""
    rows = [_parse_row(spec, n, row) for n, row in load_jsonl(spec.path)]
    found = {as_sent(spec, tokenizer, p): [dict(m) for m in p] for p, _ in rows if not isinstance(p, str)}
    if found and kind != "chat" and spec.skip_chat_template:
        raise DatasetError(f"{spec.path}: its 'messages' lines are sent to a completions endpoint in the "
                           "tokenizer's chat template: drop --skip-chat-template (or send them whole to a chat "
                           "endpoint: --backend openai-chat)")
    return found if kind == "chat" else {}


def _parse_row(spec: DatasetSpec, number: int, row: object) -> tuple[str | tuple[dict, ...], int]:
    """(prompt or messages, output length) of one line; errors name ``file:line`` and the field."""
    where = f"{spec.path}:{number}"
    if isinstance(row, dict) and "messages" in row and "prompt" not in row:
        prompt = _messages(row["messages"], where)
    elif not isinstance(row, dict) or not isinstance(row.get("prompt"), str):
        raise DatasetError(f"{where}: each line must be an object with a string field 'prompt' "
                           "(or a list 'messages' of {\"role\", \"content\"} objects)")
    else:
        prompt = row["prompt"]
    if spec.custom_output_len != -1:
        return prompt, spec.custom_output_len
    output = row.get("output_tokens")
    # bool is an int in Python; "output_tokens": true is a mistake, not 1.
    if not isinstance(output, int) or isinstance(output, bool) or output < 1:
        raise DatasetError(f"{where}: field 'output_tokens' must be a positive integer when "
                           f"--custom-output-len is -1 (got {output!r})")
    return prompt, output


def _messages(messages: object, where: str) -> tuple[dict, ...]:
    ok = isinstance(messages, list) and messages and all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in messages)
    if not ok:
        raise DatasetError(f"{where}: field 'messages' must be a non-empty list of "
                           "{\"role\": str, \"content\": str} objects")
    return tuple({"role": m["role"], "content": m["content"]} for m in messages)
