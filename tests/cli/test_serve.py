"""``servelab serve``: exact output, spec building, and whole runs with a fake engine (command kind)."""

import argparse
import signal
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from net_helpers import free_port, port_open

from servelab.cli import serve
from servelab.cli.main import main
from servelab.engines import ENGINES, EngineSpec, MemoryReport, embedded
from servelab.config import ENGINE_KINDS
from servelab.engines.kinds import kind_of
from servelab.errors import InputError

FAKE_ENGINE = Path(__file__).resolve().parents[1] / "engines" / "fake_engine.py"


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    return parser.parse_args(argv)


def test_format_engine_is_one_aligned_table():
    engine = SimpleNamespace(
        spec=EngineSpec(name="embedded", kind="vllm", model="/m"), base_url="http://127.0.0.1:8000",
        model="/m", pid=4242, log_path=Path("logs/engine.log"), ready_s=26.04,
        memory_report=MemoryReport(load_time_s=0.49, kv_cache_gib=1.0, kv_cache_tokens=46592,
                                   max_concurrency=22.75, max_concurrency_tokens=2048,
                                   num_gpu_blocks=364, block_size=128),
    )
    assert serve.format_engine(engine) == (
        "  engine           embedded (vllm)\n"
        "  endpoint         http://127.0.0.1:8000/v1\n"
        "  model            /m\n"
        "  pid              4242\n"
        "  log              logs/engine.log\n"
        "  ready in         26.0 s\n"
        "\n"
        "memory report\n"
        "  weights          -\n"
        "  load time        0.49 s\n"
        "  KV cache         1.00 GiB\n"
        "  KV cache tokens  46,592\n"
        "  max concurrency  22.75x at 2,048 tokens per request\n"
        "  KV blocks        364 x 128 tokens"
    )


def test_the_prediction_stands_beside_the_report_with_its_error():
    import dataclasses

    from servelab.planner import GPUS, PlanSpec, find_model, make_plan

    plan = make_plan(PlanSpec(model=find_model("SmolLM2-135M-Instruct"), max_model_len=2048,
                              gpu=dataclasses.replace(GPUS["cpu"], memory_gib=23.5)))
    measured = MemoryReport(kv_cache_gib=1.0, kv_cache_tokens=46592, max_concurrency=22.75,
                            max_concurrency_tokens=2048, num_gpu_blocks=370, block_size=128)
    assert serve.predicted_rows(measured, plan.report()) == [
        ("weights", "0.25 GiB"), ("KV cache", "1.00 GiB  (exact)"), ("KV cache tokens", "46,592  (exact)"),
        ("max concurrency", "22.75x at 2,048 tokens per request  (exact)"),
        ("KV blocks", "364 x 128 tokens  (-1.6%)")]


def test_command_engine_takes_its_command_line_after_the_separator():
    spec = serve.build_spec(parse("--engine", "command", "--port", "9001", "--ready-url",
                                  "http://127.0.0.1:9001/health", "--env", "A=1", "--", "srv", "--port", "9001"))
    assert (spec.kind, spec.command, spec.args, spec.env, spec.port) == (
        "command", ("srv", "--port", "9001"), (), {"A": "1"}, 9001)


def test_a_command_engine_listens_where_its_ready_url_says_unless_told():
    spec = serve.build_spec(parse("--engine", "command", "--ready-url", "http://127.0.0.1:9000/health",
                                  "--", "./srv", "--port", "9000"))
    assert (spec.port, spec.base_url) == (9000, "http://127.0.0.1:9000")


def test_vllm_engine_passes_extra_flags_through():
    spec = serve.build_spec(parse("--engine", "vllm", "--model", "org/m", "--", "--max-num-seqs", "2"))
    assert (spec.kind, spec.model, spec.args) == ("vllm", "org/m", ("--max-num-seqs", "2"))


def test_embedded_engine_has_its_own_model():
    with pytest.raises(InputError, match="--model/--url/--ready-url need another --engine"):
        serve.build_spec(parse("--model", "x"))


def test_the_engine_choices_are_the_embedded_default_then_every_kind(capsys):
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    out = capsys.readouterr().out
    assert "--engine {embedded,vllm,llamacpp,external,command,sim}" in out
    assert "engine kind (default: embedded — vLLM's CPU build serving SmolLM2-135M)" in " ".join(out.split())
    assert ENGINE_KINDS == tuple(ENGINES)


@pytest.mark.parametrize("argv", [(), ("--engine", "embedded")])
def test_the_embedded_engine_is_the_default_and_can_be_named(argv, monkeypatch, tmp_path):
    monkeypatch.setattr(embedded, "ensure_embedded_model", lambda: tmp_path)
    spec = serve.build_spec(parse(*argv, "--port", "8123", "--", "--max-num-seqs", "2"))
    assert (spec.name, spec.kind, spec.port) == ("embedded", "embedded", 8123)
    launched = kind_of(spec).resolve(spec)  # what start_engine runs
    assert (launched.kind, launched.model) == ("vllm", str(tmp_path))
    assert launched.args == ("--max-model-len", "2048", "--max-num-seqs", "2")


def test_bad_env_is_an_input_error():
    with pytest.raises(InputError, match="--env 'A': expected KEY=VALUE"):
        serve.build_spec(parse("--engine", "external", "--url", "http://h:1", "--env", "A"))


def test_env_values_are_kept_as_given_as_in_sweep_tune_and_scale():
    import argparse as ap

    from servelab.cli.engine_args import engine_entry
    from servelab.cli.sweep import add_arguments

    flags = ["--engine", "sim", "--env", "A= x ", "--env", "B=1=2"]
    assert serve.build_spec(parse(*flags)).env == {"A": " x ", "B": "1=2"}
    sweep = ap.ArgumentParser()
    add_arguments(sweep)
    assert engine_entry(sweep.parse_args(flags)).env == {"A": " x ", "B": "1=2"}


# --- whole runs: `servelab serve` as a subprocess, the fake engine behind it -------------------

def run_serve(tmp_path, port, *engine_flags) -> subprocess.Popen:
    argv = [sys.executable, "-m", "servelab.cli.main", "serve", "--engine", "command", "--port", str(port),
            "--ready-url", f"http://127.0.0.1:{port}/health", "--log-dir", str(tmp_path),
            "--", sys.executable, str(FAKE_ENGINE), "--port", str(port), *engine_flags]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_serving(proc: subprocess.Popen) -> list[str]:
    err = []
    for line in proc.stderr:
        err.append(line)
        if line == "serving; Ctrl-C to stop\n":
            return err
    raise AssertionError(f"serve ended before serving: {''.join(err)}")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_serve_prints_the_report_and_stops_cleanly_on_a_signal(tmp_path, sig):
    port = free_port()
    proc = run_serve(tmp_path, port, "--grandchild")
    try:
        err = wait_serving(proc)
        assert err[0].startswith("engine 'command' ready in ")
        proc.send_signal(sig)
        out, rest = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0
    assert rest == "servelab: engine stopped\n"
    lines = out.splitlines()
    assert lines[:2] == ["  engine           command (command)", f"  endpoint         http://127.0.0.1:{port}/v1"]
    assert lines[2] == "  model            fake-model"
    assert lines[7:] == [
        "memory report",
        "  weights          -",
        "  load time        -",
        "  KV cache         -",
        "  KV cache tokens  46,592",
        "  max concurrency  22.75x at 2,048 tokens per request",
        "  KV blocks        2,912 x 16 tokens",
    ]
    assert not port_open(port)


def test_port_taken_is_one_line_and_exit_2(tmp_path):
    port = free_port()
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        proc = run_serve(tmp_path, port)
        out, err = proc.communicate(timeout=30)
    assert (proc.returncode, out) == (2, "")
    assert err == f"servelab: error: port {port} on 127.0.0.1 is already in use; choose another with --port\n"


def test_engine_dying_at_start_exits_2_with_its_last_lines(tmp_path):
    port = free_port()
    proc = run_serve(tmp_path, port, "--ready-after", "60", "--die-after", "0.2")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert err.startswith("servelab: error: engine 'command' exited with code 3 while starting; last log lines:\n")
    assert err.endswith("  | ERROR fake engine: CUDA out of memory (simulated)\n")


def test_engine_dying_while_serving_exits_2(tmp_path):
    port = free_port()
    proc = run_serve(tmp_path, port, "--die-after", "1.5")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert "servelab: error: engine 'command' died while serving; last log lines:\n" in err
    assert err.endswith("  | ERROR fake engine: CUDA out of memory (simulated)\n")

