"""``serve --engine sim --model M --gpu G`` and ``bench --simulate --model M --gpu G``: one
step from a plan to a simulated engine, its numbers labelled SIMULATED with the plan's
provenance; a bad --gpu or --model is one line."""

import json
import subprocess
import sys
import time
import urllib.request

import pytest
from net_helpers import free_port

from servelab.cli.main import main
from servelab.cli.sim_plan import planned
from servelab.planner.sim_engine import ROOFLINE_ERROR

LOAD = ["--dataset-name", "random", "--random-input-len", "256", "--random-output-len", "32",
        "--num-prompts", "24", "--max-concurrency", "8", "--disable-tqdm", "--seed", "1"]


def plan_json(capsys, *argv: str) -> dict:
    assert main(["plan", "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_bench_simulate_runs_the_plans_engine_labelled(capsys, tmp_path, qwen3_path):
    plan = plan_json(capsys, "--model", "Qwen/Qwen3-8B", "--gpu", "A40")
    argv = ["bench", "--simulate", "--model", "Qwen/Qwen3-8B", "--gpu", "A40", "--tokenizer", qwen3_path, *LOAD,
            "--no-telemetry", "--save-result", "--result-dir", str(tmp_path), "--result-filename", "r.json"]
    assert main(argv) == 0
    banner = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("SIMULATED"))
    assert f"KV {plan['memory_report']['kv_cache_tokens']} tokens" in banner
    assert "planner roofline: Qwen/Qwen3-8B (servelab model table (planner/models.py)) on A40 x1 " \
           "(696 GB/s, 150 bf16 TFLOPS (planner/gpus.py)), weights 16-bit (not quantized)" in banner
    assert banner.endswith(f"expected error: {ROOFLINE_ERROR}")
    simulated = json.loads((tmp_path / "r.json").read_text())["servelab"]["simulated"]
    assert simulated["limits"]["kv_tokens"] == plan["memory_report"]["kv_cache_tokens"]
    assert simulated["limits"]["max_num_seqs"] == 256 and ROOFLINE_ERROR in simulated["step_model"]["source"]
    # the plan's step: weights ÷ bandwidth per step, so a decode TPOT never beats it
    tpot_floor_ms = plan["speed_floor"]["tpot_batch1_s"] * 1e3
    assert json.loads((tmp_path / "r.json").read_text())["median_tpot_ms"] >= tpot_floor_ms


def test_quantization_and_sim_flags_change_the_plan_not_just_the_label():
    bf16, awq = planned("Qwen/Qwen3-8B", "A40"), planned("Qwen/Qwen3-8B", "A40", "awq")
    assert awq.limits.kv_tokens > bf16.limits.kv_tokens  # smaller weights leave more KV cache
    # 4-bit layers, 16-bit embeddings and head (vLLM keeps those): well under half the read
    assert awq.model.read_s < bf16.model.read_s / 2
    assert awq.provenance["weights"] == "awq" and "weights awq" in awq.model.source
    capped = planned("Qwen/Qwen3-8B", "A40", flags={"--max-num-seqs": 8, "--max-model-len": 4096})
    assert (capped.limits.max_num_seqs, capped.max_model_len) == (8, 4096)


def test_explicit_sim_flags_win_over_the_plan(capsys, qwen3_path):
    argv = ["bench", "--simulate", "--model", "Qwen/Qwen3-8B", "--gpu", "A40", "--tokenizer", qwen3_path, *LOAD,
            "--no-telemetry", "--sim-max-num-seqs", "4", "--sim-kv-cache-tokens", "4096"]
    assert main(argv) == 0
    banner = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("SIMULATED"))
    assert "max_num_seqs 4, max_num_batched_tokens 2048, KV 4096 tokens" in banner


@pytest.mark.parametrize(("argv", "message"), [
    (["bench", "--simulate", "--model", "Qwen/Qwen3-8B", "--gpu", "Z99"],
     "--gpu Z99: not in servelab's GPU table (see `servelab plan --list-gpus`; for another GPU, `servelab plan "
     "--gpu-memory-gib … --gpu-bandwidth-gbs … --sim-step-model FILE`)"),
    (["bench", "--simulate", "--model", "no/such-model", "--gpu", "A40"],
     "unknown model 'no/such-model': pass a local folder or config.json path, a .gguf file, or a model from "
     "`servelab plan --list-models`"),
    (["bench", "--model", "Qwen/Qwen3-8B", "--gpu", "A40"],
     "--gpu/--quantization plan a simulated engine: add --simulate"),
    (["bench", "--simulate", "--model", "Qwen/Qwen3-8B", "--gpu", "A40", "--sim-step-overhead-ms", "3"],
     "--sim-step-* with --gpu: the plan gives the step model; pass --sim-step-model FILE to replace it"),
    (["serve", "--engine", "sim", "--model", "Qwen/Qwen3-8B", "--gpu", "Z99"],
     "--gpu Z99: not in servelab's GPU table (see `servelab plan --list-gpus`; for another GPU, `servelab plan "
     "--gpu-memory-gib … --gpu-bandwidth-gbs … --sim-step-model FILE`)"),
    (["serve", "--engine", "sim", "--gpu", "A40"],
     "--engine sim --gpu needs --model: the model to plan, named as for servelab plan"),
    (["serve", "--engine", "vllm", "--model", "Qwen/Qwen3-8B", "--gpu", "A40"],
     "--gpu plans a simulated engine: use it with --engine sim, not vllm (a real engine runs on the GPU it has)"),
])
def test_bad_input_is_one_line(argv, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tail = ["--num-prompts", "2"] if argv[0] == "bench" else ["--log-dir", str(tmp_path)]
    assert main([*argv, *tail]) == 2
    assert capsys.readouterr() == ("", f"servelab: error: {message}\n")


def test_serve_sim_model_gpu_serves_the_plan_in_one_step(tmp_path, qwen3_path, capsys):
    """The whole command: the server starts on the plan's KV cache and step model, says
    SIMULATED with the provenance, and a bench against it is labelled simulated."""
    port = free_port()
    argv = [sys.executable, "-m", "servelab.cli.main", "serve", "--engine", "sim", "--model", "Qwen/Qwen3-8B",
            "--gpu", "A40", "--port", str(port), "--log-dir", str(tmp_path / "logs"), "--", "--max-model-len", "8192"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)})
    try:
        _wait_for(f"http://127.0.0.1:{port}/v1/models", proc)
        assert main(["bench", "--base-url", f"http://127.0.0.1:{port}", "--model", "Qwen/Qwen3-8B",
                     "--tokenizer", qwen3_path, *LOAD[:6], "--num-prompts", "4", "--disable-tqdm",
                     "--no-telemetry", "--save-result", "--result-dir", str(tmp_path), "--result-filename",
                     "r.json"]) == 0
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    plan = planned("Qwen/Qwen3-8B", "A40", flags={"--max-model-len": 8192})
    assert f"KV cache tokens  {plan.limits.kv_tokens:,}" in out
    assert "max concurrency  " + f"{plan.limits.kv_tokens / 8192:.2f}x at 8,192 tokens per request" in out
    assert "SIMULATED engine, planned by servelab plan (no model runs)" in out
    assert f"expected error  {ROOFLINE_ERROR}" in out
    step = json.loads((tmp_path / "logs" / "step_model.json").read_text())
    assert step["overhead_s"] == pytest.approx(plan.model.overhead_s) and ROOFLINE_ERROR in step["source"]
    assert json.loads((tmp_path / "r.json").read_text())["servelab"]["simulated"]["mode"] == "real-time"


def _wait_for(url: str, proc, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"{url} never answered")


def test_the_step_time_line_says_whether_the_weight_read_is_added_or_overlapped():
    roofline, fitted = planned("Qwen/Qwen3-8B", "A40"), planned("Qwen/Qwen3-8B", "A100")
    assert roofline.model.overlap == 2.5 and "overlapping" in roofline.step_text() and "(exponent 2.5)" in \
        roofline.step_text()
    assert fitted.model.overlap == 1.0 and f"the weight read {fitted.model.read_s * 1e3:.2f} ms + " in \
        fitted.step_text() and "overlapping" not in fitted.step_text()
