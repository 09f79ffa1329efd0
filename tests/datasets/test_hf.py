"""servelab/datasets/hf.py: local copies of hub datasets, read as vLLM reads them, and
one-line refusals for what cannot run here. Same-seed equality with vLLM itself is in
test_vllm_parity.py (HF_CASES)."""

from __future__ import annotations

import json
import sys

import pytest

from servelab.config import DatasetSpec
from servelab.datasets import prepare_requests, sample_requests
from servelab.errors import DatasetError, InputError


def write_jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def hf_spec(path, name, **fields):
    return DatasetSpec(**({"name": "hf", "path": str(path), "hf_name": name, "num_prompts": 5, "seed": 1,
                           "request_id_prefix": "r-"} | fields))


@pytest.fixture
def mtbench(tmp_path):
    rows = [{"question_id": i, "turns": [f"Question {i}: why is the sky blue at hour {i}?", "More?"]}
            for i in range(12)]
    write_jsonl(tmp_path / "mt" / "train.jsonl", rows)
    return tmp_path / "mt"


@pytest.mark.parametrize(("name", "word"), [
    ("lmarena-ai/VisionArena-Chat", "images"), ("yale-nlp/MMVU", "videos"), ("Lin-Chen/MMStar", "images"),
    ("lmms-lab/LLaVA-OneVision-Data", "images"), ("facebook/voxpopuli", "audio"),
    ("gorilla-llm/Berkeley-Function-Calling-Leaderboard", "tool"),
])
def test_what_cannot_run_here_stops_with_one_line_naming_it(name, word, mtbench, qwen3):
    with pytest.raises(InputError) as err:
        sample_requests(hf_spec(mtbench, name), qwen3).requests
    message = str(err.value)
    assert name in message and word in message and "\n" not in message


def test_an_unknown_dataset_lists_the_known_ones(mtbench, qwen3):
    with pytest.raises(InputError, match="unknown dataset 'me/mine'.*likaixin/InstructCoder"):
        sample_requests(hf_spec(mtbench, "me/mine"), qwen3).requests


def test_a_hub_id_that_is_not_on_disk_is_never_fetched(qwen3):
    # as vLLM, --dataset-path alone names the dataset; here it must also be on disk
    spec = hf_spec("philschmid/mt-bench", None)
    with pytest.raises(DatasetError, match="no such local file or folder.*never from the hub"):
        sample_requests(spec, qwen3).requests


def test_without_the_datasets_library_the_error_says_what_to_install(mtbench, qwen3, monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # import datasets -> ImportError
    with pytest.raises(InputError, match=r"pip install 'servelab\[hf\]'"):
        sample_requests(hf_spec(mtbench, "philschmid/mt-bench"), qwen3).requests


def test_a_conversation_copy_needs_a_split(tmp_path, qwen3):
    pytest.importorskip("datasets")
    folder = write_jsonl(tmp_path / "c" / "train.jsonl", [{"conversations": [{"from": "human", "value": "hi"}]}])
    with pytest.raises(InputError, match="pass --hf-split"):
        sample_requests(hf_spec(folder.parent, "Aeala/ShareGPT_Vicuna_unfiltered"), qwen3).requests


def test_a_missing_column_is_named(tmp_path, qwen3):
    pytest.importorskip("datasets")
    write_jsonl(tmp_path / "x" / "train.jsonl", [{"question": "what?"}] * 3)
    with pytest.raises(DatasetError, match="lack the column 'turns'"):
        sample_requests(hf_spec(tmp_path / "x", "philschmid/mt-bench"), qwen3).requests


def test_one_file_reads_as_a_folder_holding_it(mtbench, qwen3):
    pytest.importorskip("datasets")
    folder = sample_requests(hf_spec(mtbench, "philschmid/mt-bench"), qwen3).requests
    single = sample_requests(hf_spec(mtbench / "train.jsonl", "philschmid/mt-bench"), qwen3).requests
    assert [r.prompt for r in single] == [r.prompt for r in folder]
    assert all(r.expected_output_len == 256 for r in folder)  # MT-Bench's fixed length, as vLLM


def test_seed_and_no_shuffle_choose_the_rows(mtbench, qwen3):
    pytest.importorskip("datasets")
    name = "philschmid/mt-bench"
    first = [r.prompt for r in sample_requests(hf_spec(mtbench, name, skip_chat_template=True), qwen3).requests]
    other = [r.prompt for r in sample_requests(hf_spec(mtbench, name, skip_chat_template=True, seed=2), qwen3).requests]
    kept = [r.prompt for r in sample_requests(hf_spec(mtbench, name, skip_chat_template=True, shuffle=False), qwen3).requests]
    assert first != other
    assert kept == [f"Question {i}: why is the sky blue at hour {i}?" for i in range(5)]


def test_blazedit_keeps_rows_within_the_distance_and_numbers_rows_read(tmp_path, qwen3):
    pytest.importorskip("datasets")
    rows = [{"code": f"x = {i}", "change_request": f"make it {i + 1}", "norm_distance": i / 10} for i in range(10)]
    write_jsonl(tmp_path / "b" / "train.jsonl", rows)
    spec = hf_spec(tmp_path / "b", "vdaita/edit_5k_char", shuffle=False, blazedit_min_distance=0.3,
                   blazedit_max_distance=0.6, num_prompts=3, oversample=False)
    requests = sample_requests(spec, qwen3).requests
    assert [r.request_id for r in requests] == ["r-3", "r-4", "r-5"]  # vLLM counts the dropped rows too
    assert "x = 3" in requests[0].prompt and requests[0].expected_output_len == 4000


def test_a_changed_file_in_the_folder_is_a_new_cache_entry(mtbench, qwen3, tmp_path, monkeypatch):
    pytest.importorskip("datasets")
    monkeypatch.setenv("SERVELAB_CACHE_DIR", str(tmp_path / "cache"))
    spec = hf_spec(mtbench, "philschmid/mt-bench", shuffle=False, skip_chat_template=True)
    assert prepare_requests(spec, qwen3).requests[0].prompt.startswith("Question 0")
    write_jsonl(mtbench / "train.jsonl", [{"turns": [f"Changed {i}"]} for i in range(6)])
    assert prepare_requests(spec, qwen3).requests[0].prompt == "Changed 0"
