"""The two command lines from the seed write-up, verbatim with `vllm bench serve`
swapped for `servelab bench`, against a server on localhost:8000, the Qwen3-14B
tokenizer in the local HF cache, and ShareGPT at the relative path they name.

Only --num-prompts is appended (argparse keeps the last value) so the test takes
seconds, not the 200 s that 2000 prompts at 10 req/s take.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket

import pytest

from servelab.cli.main import main
from servelab.datasets.tokenizer import bundled_sharegpt_path

LINE_1 = ('vllm bench serve --backend vllm --base-url "http://localhost:8000" --dataset-name sharegpt '
          "--dataset-path datasets/ShareGPT_V3_unfiltered_cleaned_split.json --num-prompts 2000 "
          "--request-rate 10 --burstiness 1.0 --save-result --append-result --result-filename "
          "test_serve_results.txt --model Qwen/Qwen3-14B --max-concurrency 10")
LINE_2 = ('vllm bench serve --backend vllm --base-url "http://localhost:8000" --model Qwen/Qwen3-14B '
          "--dataset-name prefix_repetition --num-prompts 1000 --request-rate 5 "
          "--prefix-repetition-prefix-len 256 --prefix-repetition-suffix-len 256 "
          "--prefix-repetition-num-prefixes 10 --prefix-repetition-output-len 128 --max-concurrency 10 "
          "--save-result --append-result --result-filename test_serve_results.txt")


def port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


@pytest.fixture
def seed_workspace(tmp_path, monkeypatch, qwen3_path):
    """cwd with datasets/ShareGPT…json, and an HF cache holding Qwen/Qwen3-14B's tokenizer."""
    snap = tmp_path / "hf" / "models--Qwen--Qwen3-14B" / "snapshots" / "abc123"
    shutil.copytree(qwen3_path, snap)
    (tmp_path / "hf" / "models--Qwen--Qwen3-14B" / "refs").mkdir()
    (tmp_path / "hf" / "models--Qwen--Qwen3-14B" / "refs" / "main").write_text("abc123")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    (tmp_path / "datasets").mkdir()
    os.symlink(bundled_sharegpt_path(), tmp_path / "datasets" / "ShareGPT_V3_unfiltered_cleaned_split.json")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_both_seed_lines_run_verbatim_and_append_to_one_file(seed_workspace, mock_server, capsys):
    if not port_free(8000):
        pytest.skip("port 8000 is taken on this machine")
    mock_server(port=8000, ttft_ms=1, itl_ms=0.2, model="Qwen/Qwen3-14B")
    for line, n in ((LINE_1, "20"), (LINE_2, "20")):
        argv = shlex.split(line)[3:] + ["--num-prompts", n, "--disable-tqdm"]
        assert main(["bench", *argv]) == 0
        assert f"Successful requests:                     {n:<10}" in capsys.readouterr().out
    runs = [json.loads(x) for x in (seed_workspace / "test_serve_results.txt").read_text().split("\n")]
    assert [r["completed"] for r in runs] == [20, 20]
    assert [r["max_concurrency"] for r in runs] == [10, 10] and [r["request_rate"] for r in runs] == [10.0, 5.0]
    assert all(r["model_id"] == "Qwen/Qwen3-14B" for r in runs)
