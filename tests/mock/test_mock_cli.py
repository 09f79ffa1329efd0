"""`servelab mock` as a user runs it, and the child-process runner."""

import json
import signal
import subprocess
import sys

from mock_rawhttp import request

from servelab.cli import mock as cli
from servelab.cli.main import main
from servelab.mock import MockConfig, run_in_subprocess
from servelab.mock.launch import LISTENING, _src_path


def _args(*argv):
    import argparse

    p = argparse.ArgumentParser()
    cli.add_arguments(p)
    return p.parse_args(list(argv))


def test_flags_map_to_config():
    cfg = cli.config_from_args(_args(
        "--port", "0", "--ttft-ms", "50", "--itl-ms", "10", "--output-len", "5:9", "--tokens-per-event", "2",
        "--error-rate", "0.1", "--failure-kinds", "http500,abort", "--seed", "3", "--close-after-response",
        "--model", "x", "--max-open", "4", "--eos-len", "7"))
    assert cfg == MockConfig(port=0, ttft_ms=50, itl_ms=10, output_len=(5, 9), tokens_per_event=2,
                             error_rate=0.1, failure_kinds=("http500", "abort"), seed=3,
                             close_after_response=True, model="x", max_open=4, eos_len=7)
    assert cli.config_from_args(_args("--output-len", "12")).output_len == 12


def test_bad_flag_is_one_line_error(capsys):
    assert main(["mock", "--failure-kinds", "nope"]) == 2
    assert capsys.readouterr().err.startswith("servelab: error: --failure-kinds: unknown ['nope']")


def test_cli_serves_and_writes_truth_on_sigterm(tmp_path):
    truth_file = tmp_path / "truth.json"
    argv = [sys.executable, "-m", "servelab.cli.main", "mock", "--port", "0", "--model", "cli-model",
            "--truth-file", str(truth_file)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env={"PYTHONPATH": _src_path()})
    try:
        line = proc.stdout.readline()
        assert line.startswith(LISTENING + "http://127.0.0.1:") and "model cli-model" in line
        port = int(line[len(LISTENING):].split()[0].rsplit(":", 1)[1])
        body = {"prompt": "a", "max_tokens": 3, "stream": True}
        assert request(port, "POST", "/v1/completions", body, {"X-Request-Id": "q1"}).complete
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        proc.stdout.close()
    truth = json.loads(truth_file.read_text())
    assert truth["config"]["model"] == "cli-model"
    assert [(r["request_id"], r["output_tokens"]) for r in truth["requests"]] == [("q1", 3)]


def test_run_in_subprocess_truth_over_http():
    with run_in_subprocess(MockConfig(port=0, itl_ms=1)) as mock:
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "stream": True}
        r = request(mock.port, "POST", "/v1/chat/completions", body, {"X-Request-Id": "sub-1"})
        assert len(r.json_events()) == 5
        (req,) = mock.truth().requests
        assert req.request_id == "sub-1" and req.endpoint == "chat" and len(req.itl_ns) == 3
