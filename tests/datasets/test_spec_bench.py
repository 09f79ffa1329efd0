"""servelab/datasets/spec_bench.py: Spec-Bench's and SPEED-Bench's prompts, categories, output lengths."""

from __future__ import annotations

import json

import pytest

from servelab.config import DatasetSpec
from servelab.datasets import sample_requests
from servelab.errors import DatasetError


def write(path, lines):
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_spec_bench_first_turn_category_and_output_len(tmp_path, qwen3):
    path = write(tmp_path / "question.jsonl", [
        {"question_id": i, "category": "math" if i % 2 else "writing", "turns": [f"question {i}", "follow-up"]}
        for i in range(6)])
    requests = sample_requests(DatasetSpec(name="spec_bench", path=str(path), num_prompts=0, skip_chat_template=True,
                                           spec_bench_category="math", spec_bench_output_len=33), qwen3).requests
    assert sorted(r.prompt for r in requests) == ["question 1", "question 3", "question 5"]
    assert {r.expected_output_len for r in requests} == {33}


def test_speed_bench_reads_the_subset_file_of_the_folder(tmp_path, qwen3):
    write(tmp_path / "throughput_1k.jsonl", [{"category": "c", "messages": [{"role": "user", "content": "hi there"}]}])
    requests = sample_requests(DatasetSpec(name="speed_bench", path=str(tmp_path), num_prompts=3,
                                           speed_bench_dataset_subset="throughput_1k"), qwen3).requests
    assert len(requests) == 3  # topped up, as custom is
    assert requests[0].prompt == qwen3.apply_chat_template("hi there")
    assert requests[0].expected_output_len == 4096


def test_speed_bench_needs_a_folder_and_spec_bench_a_turns_list(tmp_path, qwen3):
    with pytest.raises(DatasetError, match="must be SPEED-Bench's folder"):
        sample_requests(DatasetSpec(name="speed_bench", path=str(tmp_path / "x.jsonl")), qwen3).requests
    path = write(tmp_path / "q.jsonl", [{"category": "math", "prompt": "no turns"}])
    with pytest.raises(DatasetError, match=r"q.jsonl:1: no prompt \(a non-empty list 'turns' of strings\)"):
        sample_requests(DatasetSpec(name="spec_bench", path=str(path)), qwen3).requests
