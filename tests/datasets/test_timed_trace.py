"""servelab/datasets/timed_trace.py: chunks shared by hash id, token-id prompts, send times."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from servelab.config import DatasetSpec
from servelab.datasets import sample_requests
from servelab.datasets.timed_trace import vllm_key_seed
from servelab.errors import DatasetError


def write(tmp_path, lines):
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


def spec(path, **fields):
    return DatasetSpec(**({"name": "timed_trace", "path": path, "num_prompts": 100, "timed_trace_chunk_hash_size": 4}
                          | fields))


def test_shared_hash_ids_share_tokens_and_times_are_scaled(tmp_path, qwen3):
    path = write(tmp_path, [
        {"timestamp": 100, "input_length": 10, "output_length": 3, "hash_ids": [1, 2, 3]},
        {"timestamp": 250, "input_length": 8, "output_length": 4, "hash_ids": [1, 2, 9]},
        {"timestamp": 300, "input_length": 9, "output_length": 5, "hash_ids": [7]},  # too few ids: 4 tokens
    ])
    a, b, c = sample_requests(spec(path, timed_trace_sec_multiplier=0.001), qwen3).requests
    assert (a.prompt_len, b.prompt_len, c.prompt_len) == (10, 8, 4)
    assert a.prompt[:8] == b.prompt[:8] and a.prompt[8:] != b.prompt[:2]  # chunks 1, 2 shared
    assert [r.expected_output_len for r in (a, b, c)] == [3, 4, 5]
    assert [r.timestamp_s for r in (a, b, c)] == [0.1, 0.25, 0.3]
    assert not set(a.prompt) & qwen3.special_ids


def test_tokens_never_change_between_processes(tmp_path, qwen3):
    # Python's own hash() of a string differs per process; the trace's tokens must not
    assert vllm_key_seed("1:4") == vllm_key_seed("1:4")
    code = "import sys; print(hash(sys.argv[1]) & 0xFFFFFFFF)"
    out = subprocess.run([sys.executable, "-c", code, "1:4"], env={**os.environ, "PYTHONHASHSEED": "0"},
                         capture_output=True, text=True, check=True)
    assert int(out.stdout) == vllm_key_seed("1:4")  # the value vLLM gets under PYTHONHASHSEED=0


def test_custom_field_names_and_num_prompts(tmp_path, qwen3):
    path = write(tmp_path, [{"t": i, "in": 4, "out": 1, "h": [i]} for i in range(5)])
    requests = sample_requests(spec(path, num_prompts=3, timed_trace_label_timestamp="t",
                                    timed_trace_label_input_length="in", timed_trace_label_output_length="out",
                                    timed_trace_label_hash_ids="h"), qwen3).requests
    assert [r.timestamp_s for r in requests] == [0.0, 1.0, 2.0]


def test_a_missing_field_names_the_flag(tmp_path, qwen3):
    path = write(tmp_path, [{"timestamp": 1, "input_length": 4}])
    with pytest.raises(DatasetError, match=r"trace.jsonl:1: no number in field 'output_length'.*"
                                           r"--timed-trace-label-output-length"):
        sample_requests(spec(path), qwen3).requests
