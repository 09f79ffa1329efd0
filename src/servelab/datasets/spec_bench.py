"""Question sets for speculative decoding (vLLM's ``spec_bench`` and ``speed_bench``),
both read as vLLM reads them and then made into requests like ``custom`` lines
(shuffle, cut, chat template, count, top-up):

- ``spec_bench``: Spec-Bench's ``question.jsonl``; the prompt is each line's
  first ``turns`` entry; ``--spec-bench-category`` keeps one ``category``; every
  output length is ``--spec-bench-output-len`` (256).
- ``speed_bench``: a SPEED-Bench folder holding ``<--speed-bench-dataset-subset>.jsonl``
  (``qualitative``); the prompt is each line's first ``messages`` entry's
  ``content``; ``--speed-bench-category`` filters; output ``--speed-bench-output-len`` (4096).

One difference, on purpose: vLLM shuffles (and tops up) these two with seed 0
whatever ``--seed`` says; here ``--seed`` counts, so the requests equal vLLM's at
the default seed 0 only.
"""

from __future__ import annotations

from pathlib import Path

from servelab.config import DatasetSpec
from servelab.datasets.custom import prompt_requests
from servelab.datasets.files import load_jsonl
from servelab.datasets.tokenizer import Tokenizer
from servelab.errors import DatasetError
from servelab.records import SampleRequest


def sample_spec_bench(spec: DatasetSpec, tokenizer: Tokenizer) -> list[SampleRequest]:
    if spec.path is None:
        raise DatasetError("--dataset-path is required for --dataset-name spec_bench (Spec-Bench's question.jsonl)")
    prompts = _prompts(spec.path, spec.spec_bench_category, _first_turn)
    rows = [(p, spec.spec_bench_output_len) for p in prompts]
    return prompt_requests(spec, tokenizer, rows, f"spec_bench {spec.path}")


def sample_speed_bench(spec: DatasetSpec, tokenizer: Tokenizer) -> list[SampleRequest]:
    if spec.path is None or not Path(spec.path).is_dir():
        raise DatasetError(f"--dataset-path must be SPEED-Bench's folder for --dataset-name speed_bench "
                           f"(got {spec.path}); it holds one .jsonl per subset")
    path = str(Path(spec.path) / f"{spec.speed_bench_dataset_subset}.jsonl")
    prompts = _prompts(path, spec.speed_bench_category, _first_message)
    rows = [(p, spec.speed_bench_output_len) for p in prompts]
    return prompt_requests(spec, tokenizer, rows, f"speed_bench {path}")


def _prompts(path: str, category: str | None, prompt_of) -> list[str]:
    """Each line's prompt, in file order, keeping only ``category`` when given."""
    prompts = []
    for number, row in load_jsonl(path):
        if not isinstance(row, dict):
            raise DatasetError(f"{path}:{number}: each line must be a JSON object")
        if category and row.get("category") != category:
            continue
        prompt = prompt_of(row)
        if not isinstance(prompt, str):
            raise DatasetError(f"{path}:{number}: no prompt ({prompt_of.__doc__})")
        prompts.append(prompt)
    return prompts


def _first_turn(row: dict):
    """a non-empty list 'turns' of strings"""
    turns = row.get("turns")
    return turns[0] if isinstance(turns, list) and turns else None


def _first_message(row: dict):
    """a non-empty list 'messages' whose first item has a string 'content'"""
    messages = row.get("messages")
    first = messages[0] if isinstance(messages, list) and messages else None
    return first.get("content") if isinstance(first, dict) else None
