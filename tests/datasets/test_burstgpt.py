"""servelab/datasets/burstgpt.py: vLLM's filter, its row draw, synthetic prompts of the trace's sizes."""

from __future__ import annotations

import numpy as np
import pytest

from servelab.config import DatasetSpec
from servelab.datasets import sample_requests
from servelab.errors import DatasetError

HEADER = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"


def write(tmp_path, rows, header=HEADER):
    path = tmp_path / "burst.csv"
    path.write_text("\n".join([header, *rows]) + "\n")
    return str(path)


def test_only_gpt4_rows_with_a_response_are_drawn(tmp_path, qwen3):
    path = write(tmp_path, ["0,GPT-4,10,5,15,x", "1,ChatGPT,20,6,26,x", "2,GPT-4,30,0,30,x", "3,GPT-4,40,7,47,x"])
    requests = sample_requests(DatasetSpec(name="burstgpt", path=path, num_prompts=50, seed=2), qwen3).requests
    assert {(r.prompt_len, r.expected_output_len) for r in requests} == {(10, 5), (40, 7)}
    # drawn with replacement (50 > 2 rows) by numpy's legacy RandomState, as pandas' sample draws them
    picks = np.random.RandomState(2).choice(2, size=50, replace=True)
    assert [r.prompt_len for r in requests] == [[10, 40][k] for k in picks]


def test_prompt_is_the_text_of_consecutive_ids(tmp_path, qwen3):
    path = write(tmp_path, ["0,GPT-4,6,3,9,x"])
    [first, second] = sample_requests(DatasetSpec(name="burstgpt", path=path, num_prompts=2), qwen3).requests
    assert first.prompt == qwen3.decode(list(range(6))) and second.prompt == qwen3.decode(list(range(1, 7)))
    assert first.request_id == "bench-0" and second.request_id == "bench-1"


@pytest.mark.parametrize(("rows", "header", "message"), [
    (["0,GPT-4,1,1,2,x"], "Timestamp,Model,Tokens", "not a BurstGPT CSV"),
    (["0,ChatGPT,1,1,2,x"], HEADER, "no GPT-4 row"),
    (["0,GPT-4,many,1,2,x"], HEADER, r":2: Request tokens and Response tokens must be numbers"),
])
def test_bad_files_are_one_line_errors(tmp_path, qwen3, rows, header, message):
    with pytest.raises(DatasetError, match=message):
        sample_requests(DatasetSpec(name="burstgpt", path=write(tmp_path, rows, header), num_prompts=2), qwen3).requests
