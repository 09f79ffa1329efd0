"""The tasks of ``--quality-tasks`` as a run's requests: written to a custom dataset file (one
request per item, every item once) for the length of the run — a ``prompt`` item as its prompt,
a ``messages`` item as its whole conversation (datasets/custom.py: a chat endpoint is sent the
messages, a completions endpoint their rendering by the tokenizer's chat template)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

from servelab.config import BenchSpec
from servelab.quality import tasks

VLLM_CUSTOM_OUTPUT_LEN = 256  # vLLM's default --custom-output-len: left as is, the tasks' own is used
TASK_OUTPUT_LEN = 48  # tokens an answer to a built-in item may take (they are short)


@contextlib.contextmanager
def with_tasks(spec: BenchSpec) -> Iterator[BenchSpec]:
    """``spec`` itself, or — with --quality-tasks — ``spec`` sending the tasks' prompts."""
    q = spec.quality
    if q is None or q.tasks is None:
        yield spec
        return
    items = tasks.load(q.tasks, q.tasks_seed)
    with tempfile.TemporaryDirectory(prefix="servelab-quality-") as folder:
        path = Path(folder) / "quality-tasks.jsonl"
        path.write_text("".join(json.dumps(_line(i)) + "\n" for i in items))
        out_len = spec.dataset.custom_output_len
        dataset = dataclasses.replace(
            spec.dataset, name="custom", path=str(path), num_prompts=len(items),
            custom_output_len=TASK_OUTPUT_LEN if out_len == VLLM_CUSTOM_OUTPUT_LEN else out_len)
        yield dataclasses.replace(spec, dataset=dataset)


def _line(item: tasks.Item) -> dict:
    return {"prompt": item.prompt} if item.messages is None else {"messages": list(item.messages)}
