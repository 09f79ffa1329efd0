"""A bench spec made to judge quality: the answers kept, greedy unless told otherwise, and —
with tasks — the tasks' prompts as its requests (a custom dataset file of their lines)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from servelab.config import BenchSpec, QualitySpec
from servelab.quality import tasks

VLLM_CUSTOM_OUTPUT_LEN = 256  # vLLM's default --custom-output-len: left as is, the tasks' own is used
TASK_OUTPUT_LEN = 48  # tokens an answer to a built-in item may take (they are short)


def judged(spec: BenchSpec, quality: QualitySpec, sampling_seed: int | None = None) -> BenchSpec:
    """``spec`` keeping its answers (--save-detailed), at temperature 0 unless one was given,
    with ``sampling_seed`` sent as each request's ``seed`` (vLLM's per-request sampling seed,
    not the dataset's --seed)."""
    if not quality.judged and sampling_seed is None:
        return spec
    sampling = dict(spec.request.sampling)
    sampling.setdefault("temperature", 0.0)
    extra = dict(spec.request.extra_body)
    if sampling_seed is not None:
        extra["seed"] = sampling_seed
    request = dataclasses.replace(spec.request, sampling=tuple(sampling.items()), extra_body=tuple(extra.items()))
    output = dataclasses.replace(spec.output, save_detailed=True)
    return dataclasses.replace(spec, request=request, output=output, quality=quality if quality.judged else None)


def with_tasks(spec: BenchSpec, folder: str | Path) -> BenchSpec:
    """The tasks' prompts as the run's requests: written to ``folder/quality-tasks.jsonl`` (a
    custom dataset: one request per item, every item once)."""
    q = spec.quality
    items = tasks.load(q.tasks, q.tasks_seed)
    path = Path(folder) / "quality-tasks.jsonl"
    path.write_text("".join(json.dumps({"prompt": i.prompt}) + "\n" for i in items))
    out_len = spec.dataset.custom_output_len
    dataset = dataclasses.replace(spec.dataset, name="custom", path=str(path), num_prompts=len(items),
                                  custom_output_len=TASK_OUTPUT_LEN if out_len == VLLM_CUSTOM_OUTPUT_LEN else out_len)
    return dataclasses.replace(spec, dataset=dataset)
