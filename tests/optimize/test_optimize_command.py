"""``servelab optimize`` on a command engine: the mock launched as a server whose own command
line caps it (``--max-num-seqs 4``, the mock's ``--max-open``). The mock runs at most that many
requests at once and serves each in ttft + (tokens − 1) × itl, so under a client allowing 32
its throughput is proportional to the cap: 4 → 8 → 16 doubles it twice (4×).

The optimizer must read the cap where it was set (the command line, not vLLM's default 256),
step from it (4 → 8 first), say which source gave the value, and end ≥ 3× its baseline.
"""

from __future__ import annotations

import json
import socket
import sys

from net_helpers import free_port

from servelab.cli.main import main


def _argv(tmp_path, qwen3_path, port: int, *extra: str) -> list[str]:
    return ["optimize", "--results", str(tmp_path / "results"), "--name", "capped",
            "--dataset-name", "random", "--random-input-len", "16", "--random-output-len", "16",
            "--num-prompts", "32", "--max-concurrency", "32", "--tokenizer", qwen3_path, "--warmup", "1",
            "--no-operating-point", *extra,
            "--engine", "command", "--port", str(port), "--ready-url", f"http://127.0.0.1:{port}/health",
            "--knobs", "max-num-seqs",
            "--", sys.executable, "-m", "servelab.cli.main", "mock", "--port", str(port), "--ttft-ms", "10",
            "--itl-ms", "10", "--max-num-seqs", "4"]


def test_a_cap_on_the_command_line_is_stepped_from_its_value(tmp_path, qwen3_path, capsys):
    """Done-when of issue 34: tries 8 first (not 256 → 512) and ends at ≥ 3× the baseline."""
    port = free_port()
    assert main(_argv(tmp_path, qwen3_path, port, "--budget-runs", "6")) == 0
    record = json.loads((tmp_path / "results" / "capped" / "optimize.json").read_text())
    first = record["steps"][0]["change"]
    assert (first["name"], first["from"], first["to"], first["from_source"]) == (
        "--max-num-seqs", "4", "8", "command line")
    base, best = record["baseline"]["result"]["output_tok_s"], record["final"]["output_tok_s"]
    assert best >= 3 * base, (base, best, [s["why"] for s in record["steps"]])
    # the step after a kept one reads the value the kept step set, and says so
    assert record["steps"][1]["change"]["from_source"] == "set by a kept step"
    # the serve line runs the cap it measured, once (the command line's value replaced, not appended to)
    serve = record["final"]["serve_command"]
    assert serve.count("--max-num-seqs") == 1 and "--max-num-seqs 16" in serve
    note = (tmp_path / "results" / "capped" / "optimize.md").read_text()
    assert "--max-num-seqs 4 → 8" in note and "Stepped from 4 (source: command line)." in note
    # the next command keeps what the engine needed: its port, its ready URL, its own command line
    scale = record["next"]["scale_command"]
    assert scale.startswith(f"servelab scale --replicas 2 --engine command --port {port} --ready-url "
                            "'http://127.0.0.1:{port}/health' ")
    assert scale.endswith("-m servelab.cli.main mock --port '{port}' --ttft-ms 10 --itl-ms 10 --max-num-seqs 16")
    assert "Not measured: --no-operating-point was asked" in note and "the run stopped" not in note


def test_a_failed_engine_start_is_why_it_stopped(tmp_path, qwen3_path, capsys):
    """Item 7: the port is taken, the engine cannot start: the record says why it stopped and the
    report says so (not "Still running")."""
    port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        assert main(_argv(tmp_path, qwen3_path, port)) != 0
    folder = tmp_path / "results" / "capped"
    record = json.loads((folder / "optimize.json").read_text())
    assert record["stopped_because"].startswith("failed: ") and f"port {port}" in record["stopped_because"]
    note = (folder / "optimize.md").read_text()
    assert "Still running" not in note and f"Stopped because: failed: port {port}" in note
