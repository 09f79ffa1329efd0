"""``servelab bench`` end to end against the mock: rows, files, failures, bad input."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from servelab.cli.main import main

VLLM_ROWS = [
    "============ Serving Benchmark Result ============",
    "Successful requests:", "Failed requests:", "Maximum request concurrency:",
    "Request rate configured (RPS):", "Benchmark duration (s):", "Total input tokens:",
    "Total generated tokens:", "Request throughput (req/s):", "Output token throughput (tok/s):",
    "Peak output token throughput (tok/s):", "Peak concurrent requests:", "Total token throughput (tok/s):",
    "---------------Time to First Token----------------", "Mean TTFT (ms):", "Median TTFT (ms):", "P99 TTFT (ms):",
    "-----Time per Output Token (excl. 1st token)------", "Mean TPOT (ms):", "Median TPOT (ms):", "P99 TPOT (ms):",
    "---------------Inter-token Latency----------------", "Mean ITL (ms):", "Median ITL (ms):", "P99 ITL (ms):",
    "==================================================",
]

# keys `vllm bench serve --save-result` writes (vLLM 0.32, no --save-detailed)
VLLM_KEYS = {
    "date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts", "request_rate",
    "burstiness", "max_concurrency", "duration", "completed", "failed", "total_input_tokens",
    "total_output_tokens", "request_throughput", "request_goodput", "output_throughput",
    "total_token_throughput", "latencies", "queue_times", "max_output_tokens_per_s",
    "max_concurrent_requests", "rtfx", "mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms",
    "mean_tpot_ms", "median_tpot_ms", "std_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "median_itl_ms",
    "std_itl_ms", "p99_itl_ms",
}


def bench_args(url, tok, *extra):
    return ["bench", "--backend", "vllm", "--base-url", url, "--model", "mock", "--tokenizer", tok,
            "--dataset-name", "random", "--random-input-len", "16", "--random-output-len", "8",
            "--disable-tqdm", *extra]


def block(out: str) -> list[str]:
    lines = out.splitlines()
    start = lines.index(VLLM_ROWS[0])
    return lines[start:lines.index("=" * 50, start) + 1]


def test_rows_counts_and_files_against_the_mock(mock_server, qwen3_path, tmp_path, capsys):
    mock = mock_server(ttft_ms=2, itl_ms=1)
    rc = main(bench_args(mock.url, qwen3_path, "--num-prompts", "12", "--request-rate", "200",
                         "--max-concurrency", "4", "--save-result", "--result-dir", str(tmp_path),
                         "--result-filename", "r.json"))
    assert rc == 0
    rows = block(capsys.readouterr().out)
    assert [r if r.startswith(("=", "-")) else r[:40].rstrip() for r in rows] == VLLM_ROWS
    assert rows[1] == "Successful requests:".ljust(40) + " " + "12".ljust(10)
    assert rows[7] == "Total generated tokens:".ljust(40) + " " + "96".ljust(10)
    result = json.loads((tmp_path / "r.json").read_text())
    truth = mock.truth()
    # prompt tokens are the server's usage.prompt_tokens (the mock counts words), as vLLM's client takes them
    server_prompt = sum(r.prompt_tokens for r in truth.requests)
    assert VLLM_KEYS <= set(result) and result["completed"] == 12 and result["total_input_tokens"] == server_prompt
    assert server_prompt != 12 * 16 and result["servelab"]["prompt_tokens_source"] == ["usage"]
    records = [json.loads(x) for x in open(result["servelab"]["records_file"])]
    assert len(records) == 12 and {r["output_tokens"] for r in records} == {8}
    truth_ids = {r.request_id for r in truth.requests}
    assert {r["request_id"] for r in records} <= truth_ids  # every record is a request the server saw
    assert result["servelab"]["provenance"]["server_models"]["data"][0]["id"] == "mock"


def test_append_result_writes_one_json_object_per_run(mock_server, qwen3_path, tmp_path):
    mock = mock_server()
    args = bench_args(mock.url, qwen3_path, "--num-prompts", "3", "--append-result",
                      "--result-dir", str(tmp_path), "--result-filename", "runs.txt")
    assert main(args) == 0 and main(args) == 0
    lines = (tmp_path / "runs.txt").read_text().split("\n")
    assert len(lines) == 2 and all(json.loads(x)["completed"] == 3 for x in lines)


def test_failed_requests_are_counted_with_reasons(mock_server, qwen3_path, capsys):
    mock = mock_server(error_rate=0.5, seed=3)
    assert main(bench_args(mock.url, qwen3_path, "--num-prompts", "20")) == 0
    out = capsys.readouterr().out
    truth_failed = sum(r.finish != "ok" for r in mock.truth().requests)
    assert 0 < truth_failed < 20
    assert f"Failed requests:                         {truth_failed:<10}" in out
    assert "HTTP 500" in out


def test_every_request_failing_exits_non_zero(mock_server, qwen3_path):
    mock = mock_server(error_rate=1.0)
    assert main(bench_args(mock.url, qwen3_path, "--num-prompts", "4")) == 1


def test_chat_backend_counts_content_not_the_role_delta(mock_server, qwen3_path, capsys):
    mock = mock_server(ttft_ms=30, itl_ms=1)
    args = bench_args(mock.url, qwen3_path, "--num-prompts", "2")
    args[2] = "openai-chat"
    assert main(args) == 0
    out = capsys.readouterr().out
    mean_ttft = float(next(x for x in out.splitlines() if x.startswith("Mean TTFT")).split()[-1])
    assert mean_ttft >= 30  # the role chunk is sent at once; counting it would give ~0


def test_a_local_hf_copy_runs_against_the_mock(mock_server, qwen3_path, tmp_path):
    pytest.importorskip("datasets", reason="the hf dataset reads through Hugging Face's datasets (servelab[hf])")
    folder = tmp_path / "mt-bench"
    folder.mkdir()
    rows = [{"question_id": i, "turns": [" ".join(["word"] * (i + 3)), "next"]} for i in range(10)]
    (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    mock = mock_server()
    args = bench_args(mock.url, qwen3_path, "--dataset-name", "hf", "--dataset-path", str(folder), "--hf-name",
                      "philschmid/mt-bench", "--hf-output-len", "5", "--skip-chat-template", "--disable-shuffle",
                      "--num-prompts", "6", "--save-result", "--result-dir", str(tmp_path), "--result-filename",
                      "r.json")
    assert main(args) == 0
    result = json.loads((tmp_path / "r.json").read_text())
    # unshuffled, the first six rows go out: 3..8 words each (the mock counts words), 5 tokens back each
    assert result["completed"] == 6 and result["total_output_tokens"] == 30
    assert result["total_input_tokens"] == sum(range(3, 9))


@pytest.mark.parametrize("extra, needle", [
    (["--dataset-name", "sharegpt", "--dataset-path", "/nonexistent/sg.json"], "/nonexistent/sg.json"),
    (["--dataset-name", "hf", "--dataset-path", "/nonexistent/copy", "--hf-name", "openai/gsm8k"],
     "/nonexistent/copy: no such local file or folder"),
    (["--dataset-name", "random", "--dataset-path", "x.json"], "--dataset-path"),
    (["--max-concurrency", "0"], "--max-concurrency"),
    (["--goodput", "ttft=5"], "--goodput"),
    (["--goodput", "latency:5"], "--goodput"),
    (["--percentile-metrics", "ttft,foo"], "--percentile-metrics"),
    (["--request-rate", "0"], "--request-rate"),
    (["--metadata", "novalue"], "--metadata"),
])
def test_bad_input_is_one_line_exit_2(extra, needle, qwen3_path, capsys):
    rc = main(bench_args("http://127.0.0.1:9", qwen3_path, *extra))
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and needle in err and "Traceback" not in err


def test_malformed_and_empty_datasets_name_the_file(tmp_path, qwen3_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('[{"id": "a", "conversations": [}]')
    assert main(bench_args("http://127.0.0.1:9", qwen3_path, "--dataset-name", "sharegpt",
                           "--dataset-path", str(bad))) == 2
    assert str(bad) in capsys.readouterr().err
    empty = tmp_path / "empty.json"
    empty.write_text('[{"id": "a", "conversations": [{"from": "human", "value": "hi"}]}]')
    assert main(bench_args("http://127.0.0.1:9", qwen3_path, "--dataset-name", "sharegpt",
                           "--dataset-path", str(empty))) == 2
    assert str(empty) in capsys.readouterr().err


@pytest.mark.parametrize("named", [True, False])
def test_nothing_listening_is_one_line_naming_the_url_and_the_ready_check(named, qwen3_path, capsys):
    from net_helpers import free_port

    url = f"http://127.0.0.1:{free_port()}"
    args = bench_args(url, qwen3_path, "--num-prompts", "2")
    rc = main(args if named else [a for a in args if a not in ("--model", "mock")])
    err = capsys.readouterr().err
    assert rc == 2 and err == (f"servelab: error: nothing answered at {url} (is the server running there? "
                               "pass --ready-check-timeout-sec N to wait up to N s for one that is starting)\n")


def test_the_ready_check_waits_for_a_server_and_then_says_so(qwen3_path, capsys):
    from net_helpers import free_port

    url = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    rc = main(bench_args(url, qwen3_path, "--num-prompts", "2", "--ready-check-timeout-sec", "2"))
    err = capsys.readouterr().err
    assert rc == 2 and time.monotonic() - started >= 2.0
    assert err.startswith(f"servelab: error: {url} not ready after 2 s: ConnectionRefusedError")
    assert len(err.splitlines()) == 1


def test_unknown_tokenizer_exit_2(capsys):
    rc = main(bench_args("http://127.0.0.1:9", "no-such-org/no-such-model"))
    err = capsys.readouterr().err
    assert rc == 2 and "no-such-org/no-such-model" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_writes_what_was_measured(sig, qwen3_path, tmp_path):
    from servelab.mock.config import MockConfig
    from servelab.mock.launch import run_in_subprocess

    with run_in_subprocess(MockConfig(port=0, ttft_ms=5, itl_ms=20)) as mock:
        cmd = [sys.executable, "-m", "servelab.cli.main", *bench_args(mock.url, qwen3_path),
               "--num-prompts", "400", "--max-concurrency", "4", "--random-output-len", "10",
               "--save-result", "--result-dir", str(tmp_path), "--result-filename", "r.json"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # mid-run: once some requests have finished (a fixed sleep could land during start-up on a busy machine)
        deadline = time.monotonic() + 60
        while sum(r.finish == "ok" for r in mock.truth().requests) < 8 and time.monotonic() < deadline:
            time.sleep(0.1)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err  # the convention: Ctrl-C 130, SIGTERM 143
    result = json.loads((tmp_path / "r.json").read_text())
    assert 0 < result["completed"] < 400 and result["failed"] == 0
    assert result["servelab"]["interrupted"] is True
    assert "interrupted" in out


def test_ready_check_warmups_and_detailed_lists(mock_server, qwen3_path, tmp_path):
    mock = mock_server()
    rc = main(bench_args(mock.url, qwen3_path, "--num-prompts", "5", "--num-warmups", "3",
                         "--ready-check-timeout-sec", "5", "--save-result", "--save-detailed",
                         "--result-dir", str(tmp_path), "--result-filename", "d.json",
                         "--metadata", "gpu=none", "tp=1", "--request-id-prefix", "t-"))
    assert rc == 0
    ids = [r.request_id for r in mock.truth().requests]
    assert ids.count("t-0-warmup") == 4 and sorted(i for i in ids if "warmup" not in i) == [f"t-{i}" for i in range(5)]
    result = json.loads((tmp_path / "d.json").read_text())
    assert result["completed"] == 5  # warm-ups are not measured
    assert len(result["ttfts"]) == len(result["itls"]) == len(result["generated_texts"]) == 5
    assert all(len(x) == 7 for x in result["itls"])  # 8 tokens per request
    assert result["gpu"] == "none" and result["tp"] == "1"


def test_a_server_dying_mid_run_leaves_no_request_uncounted(qwen3_path, tmp_path, capsys):
    """8 of 40 complete, those in flight die with the server, the rest are refused: each one
    is counted once (console, result, records) and written once, with its error."""
    from standin_server import StandIn

    server = StandIn(tokens=8, gap_s=0.01, die_after=8)
    try:
        rc = main(bench_args(server.url, qwen3_path, "--num-prompts", "40", "--max-concurrency", "4",
                             "--save-result", "--result-dir", str(tmp_path), "--result-filename", "r.json"))
    finally:
        server.stop()
    out = capsys.readouterr().out
    result = json.loads((tmp_path / "r.json").read_text())
    records = [json.loads(x) for x in open(result["servelab"]["records_file"])]
    assert rc == 0 and result["completed"] >= 8 and result["completed"] + result["failed"] == 40

    def console_count(row: str) -> int:
        return int(next(x for x in out.splitlines() if x.startswith(row)).split()[-1])

    assert (console_count("Successful requests:"), console_count("Failed requests:")) == \
        (result["completed"], result["failed"])
    assert len(records) == len({r["request_id"] for r in records}) == 40
    assert sum(r["error"] is not None for r in records) == result["failed"] >= 24
