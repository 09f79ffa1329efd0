"""`servelab data inspect` on agentic sessions (cli/data.py): their shape first, exactly."""

from __future__ import annotations

from pathlib import Path

from servelab.cli.main import main

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "agentic_weka.jsonl"


def test_inspect_describes_a_weka_trace_scaled(qwen3_path, capsys):
    assert main(["data", "inspect", "--dataset-name", "weka", "--dataset-path", str(EXAMPLE), "--trace-scale", "0.5",
                 "--tokenizer", qwen3_path]) == 0
    out = capsys.readouterr().out
    # scaled ×0.5: blocks of 32; 160 of 630 prompt tokens found again at 16 (explore1's block 1,
    # each main agent's blocks 1-2)
    assert out.split("\n\n")[0] == (
        f"Agentic sessions (trace {EXAMPLE}, scaled ×0.5)\n"
        "  sessions 2 · calls 8 · sub-agents 3 · max fan-out 2 · turns fed a tool's result 3\n"
        "  blocks 12 of 32 tokens · input tokens 630 (longest call 150) · output tokens 46\n"
        "  waits (tool / think time): total 1.0 s, median 0.0 s, max 0.5 s\n"
        "  ideal prefix-cache hit rate 25.4% (an unbounded cache at block size 16, every call in order)")
    assert "  dataset    weka calls\n" in out and "  samples    8\n" in out


def test_inspect_of_a_bad_trace_is_one_line(tmp_path, qwen3_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"block_size": 64, "requests": [{"t": -2, "in": 10, "out": 1}]}\n')
    assert main(["data", "inspect", "--dataset-name", "weka", "--dataset-path", str(bad),
                 "--tokenizer", qwen3_path]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith(f"{bad}:1: requests[0].t is negative (-2 s)")


OTEL = Path(__file__).resolve().parents[2] / "docs" / "examples" / "agentic_otel.jsonl"


def test_inspect_describes_an_otel_span_export_and_the_locked_cut(qwen3_path, capsys):
    assert main(["data", "inspect", "--dataset-name", "otel", "--dataset-path", str(OTEL),
                 "--tokenizer", qwen3_path]) == 0
    out = capsys.readouterr().out
    assert out.split("\n\n")[0] == (
        f"Agentic sessions (trace {OTEL})\n"
        "  OpenTelemetry spans 17 · tool spans 3 (4.5 s) · calls with no input count (grown from their previous "
        "call) 1 · calls overlapping their agent's call before (sent beside it) 0\n"
        "  sessions 2 · calls 8 · sub-agents 2 · max fan-out 2 · turns fed a tool's result 0\n"
        "  blocks 21 of 64 tokens · input tokens 2660 (longest call 740) · output tokens 172\n"
        "  waits (tool / think time): total 32.72 s, median 0.6 s, max 30.1 s\n"
        "  ideal prefix-cache hit rate 53.5% (an unbounded cache at block size 16, every call in order)")
    assert main(["data", "inspect", "--dataset-name", "otel", "--dataset-path", str(OTEL), "--agentic-locked",
                 "--tokenizer", qwen3_path]) == 0
    out = capsys.readouterr().out
    assert "waits capped at 10.0 s (1 cut)" in out.splitlines()[0]
    assert "  locked (AgentX-style): start points uniform over each session's recorded run; " in out
