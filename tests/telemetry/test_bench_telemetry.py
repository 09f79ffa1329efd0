"""Telemetry end to end: ``servelab bench`` against the mock records a timeline,
summarizes it in the result, and diagnoses the limit the mock was given."""

from __future__ import annotations

import json
import statistics

import pytest

from servelab.cli.main import main
from servelab.telemetry import timeline
from servelab.telemetry.gpu import gpu_devices


def bench(url: str, tok: str, out, *extra: str) -> list[str]:
    return ["bench", "--backend", "vllm", "--base-url", url, "--model", "mock", "--tokenizer", tok,
            "--dataset-name", "random", "--random-input-len", "16", "--random-output-len", "10",
            "--disable-tqdm", "--telemetry-interval", "0.1", "--save-result", "--result-dir", str(out),
            "--result-filename", "r.json", *extra]


def test_engine_cap_of_2_under_16_streams_is_a_scheduler_cap(mock_server, qwen3_path, tmp_path, capsys):
    mock = mock_server(ttft_ms=20, itl_ms=10, max_open=2)
    assert main(bench(mock.url, qwen3_path, tmp_path, "--num-prompts", "48", "--max-concurrency", "16")) == 0
    out = capsys.readouterr().out
    result = json.loads((tmp_path / "r.json").read_text())
    diagnosis = result["servelab"]["diagnosis"]
    top = diagnosis["verdicts"][0]
    assert diagnosis["verdict"] == "scheduler-cap"
    assert top["evidence"]["running_max"] == 2 and top["evidence"]["plateau"] == 2
    assert top["evidence"]["waiting_max"] == 14  # 16 in flight − 2 running
    # The median is the timeline's, over the loaded samples of the run: mostly 14, less in the
    # drain and wherever a sample caught a finished request not yet replaced by the client
    during = timeline.read(tmp_path / "r.timeline.jsonl").during("engine")
    loaded = [(s["running"], s["waiting"]) for s in during if s["running"] + s["waiting"] >= 1]
    assert top["evidence"]["waiting_median"] == statistics.median(w for _, w in loaded)
    at_cap = statistics.median(w for r, w in loaded if r >= 2 and w >= 1)
    assert at_cap >= 10  # two thirds of the run is the full queue, the drain's last third 12 … 0
    assert "running plateaus at 2" in top["summary"] and f"{at_cap:.0f} waiting (median; max 14)" in top["summary"]
    assert "servelab diagnosis: scheduler-cap" in out and out.rstrip().endswith(diagnosis_tail(result))


def diagnosis_tail(result: dict) -> str:
    return result["servelab"]["diagnosis"]["not_checked"][-1]


def test_two_streams_without_an_engine_cap_is_the_clients_cap(mock_server, qwen3_path, tmp_path):
    mock = mock_server(ttft_ms=20, itl_ms=10)
    assert main(bench(mock.url, qwen3_path, tmp_path, "--num-prompts", "24", "--max-concurrency", "2")) == 0
    result = json.loads((tmp_path / "r.json").read_text())
    top = result["servelab"]["diagnosis"]["verdicts"][0]
    assert top["id"] == "client-concurrency-cap" and top["level"] == "high"
    assert top["evidence"]["max_concurrency"] == 2 and top["evidence"]["engine_waiting_mean"] == 0.0


def test_the_result_carries_the_summary_and_the_timeline_beside_it(mock_server, qwen3_path, tmp_path):
    mock = mock_server(ttft_ms=20, itl_ms=10, max_open=2)
    assert main(bench(mock.url, qwen3_path, tmp_path, "--num-prompts", "24", "--max-concurrency", "8")) == 0
    telemetry = json.loads((tmp_path / "r.json").read_text())["servelab"]["telemetry"]
    assert telemetry["timeline_file"] == str(tmp_path / "r.timeline.jsonl")
    assert telemetry["engine"]["running"]["max"] == 2.0 and telemetry["engine"]["waiting"]["max"] == 6.0
    assert telemetry["engine"]["names"]["kv_usage"] == "vllm:kv_cache_usage_perc"
    # the mock runs on the CPU: where NVML sees a GPU (a GPU machine) it is sampled, but not the engine's
    gpu = telemetry["gpu"]
    assert gpu["status"] == "absent" or (gpu["engine_gpus"] == [] and "the engine is not on them" in
                                         gpu["engine_gpus_rule"])
    assert gpu["status"] == ("ok" if gpu_devices() else "absent") and telemetry["client"]["in_flight"]["max"] == 8
    assert telemetry["samples"]["engine"] >= 5 and telemetry["samples"]["client"] >= 5
    lines = (tmp_path / "r.timeline.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["servelab_timeline"] == 1 and len(lines) > 10


def test_no_telemetry(mock_server, qwen3_path, tmp_path, capsys):
    mock = mock_server()
    assert main(bench(mock.url, qwen3_path, tmp_path, "--num-prompts", "4", "--no-telemetry")) == 0
    result = json.loads((tmp_path / "r.json").read_text())
    assert "telemetry" not in result["servelab"] and not (tmp_path / "r.timeline.jsonl").exists()
    assert "no timeline (telemetry was off" in capsys.readouterr().out


@pytest.mark.parametrize("value", ["0", "-1"])
def test_bad_interval_is_one_line_exit_2(value, qwen3_path, tmp_path, capsys):
    rc = main(bench("http://127.0.0.1:9", qwen3_path, tmp_path, "--telemetry-interval", value))
    assert rc == 2 and "--telemetry-interval" in capsys.readouterr().err
