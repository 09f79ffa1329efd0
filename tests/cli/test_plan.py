"""``servelab plan``: exact output for the embedded engine, a GPU, llama.cpp; one-line errors."""

import argparse
import json
import subprocess
import sys

import pytest

from servelab.cli import plan


def run(capsys, *argv: str) -> str:
    parser = argparse.ArgumentParser()
    plan.add_arguments(parser)
    assert plan.run(parser.parse_args(argv)) == 0
    return capsys.readouterr().out


@pytest.fixture(autouse=True)
def fixed_machine(monkeypatch):
    monkeypatch.setattr(plan, "machine_memory_gib", lambda: 23.5)


def test_the_embedded_engine_on_this_machine(capsys):
    assert run(capsys, "--max-model-len", "2048") == (
        "plan: HuggingFaceTB/SmolLM2-135M-Instruct on cpu x1 (23.5 GiB each), vllm, "
        "weights 16-bit (not quantized), KV auto, TP 1\n"
        "assumes: vLLM 0.32's defaults (--vllm-version); the CPU build's KV cache is VLLM_CPU_KVCACHE_SPACE=1 GiB\n"
        "\n"
        "memory report (predicted)\n"
        "  weights             0.25 GiB\n"
        "  KV cache            1.00 GiB\n"
        "  KV cache tokens     46,592\n"
        "  max concurrency     22.75x at 2,048 tokens per request\n"
        "  KV blocks           364 x 128 tokens\n"
        "  KV per token        22.50 KiB\n"
        "  other memory        -\n"
        "\n"
        "speed floor (roofline: a lower bound of latency, an upper bound of throughput)\n"
        "  TPOT at batch 1     10.76 ms (weights / peak bandwidth)\n"
        "  compute-bound from  8 sequences\n"
        "  prefill per 1k tok  1345.2 ms\n"
        "\n"
        "fits: 22 requests of 2,048 tokens at once\n"
    )


def test_qwen3_14b_on_an_h100(capsys):
    out = run(capsys, "--model", "Qwen3-14B", "--gpu", "H100", "--max-model-len", "8192")
    assert "  KV per token        160.00 KiB\n" in out
    assert "  KV blocks           17,928 x 16 tokens\n" in out
    assert "\nfits: 35 requests of 8,192 tokens at once\n" in out
    assert out.endswith("note: activations, CUDA graphs and non-torch memory are modelled (fitted on published startup logs: "
                        "docs/planner_accuracy.md); the rest is exact\n")


def test_llamacpp_slots(capsys):
    out = run(capsys, "--engine", "llamacpp", "--model", "SmolLM2-135M-Instruct", "--quantization", "Q4_1",
              "--ctx-size", "4096", "--parallel", "4")
    assert "  KV cache            0.09 GiB\n  KV cache tokens     4,096\n" in out
    assert "  slots               4 x 1,024 tokens\n" in out
    assert "\nfits: 4 requests of 1,024 tokens at once\n" in out


@pytest.mark.parametrize("argv, message", [
    (["--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100"],
     "meta-llama/Llama-3.1-70B-Instruct does not fit on H100: weights 131.42 GiB per GPU + 2.62 GiB other memory "
     "leave no room for a KV cache in the 73.28 GiB vLLM may use (0.92 x 79.65 GiB); would fit with "
     "--gpu H100:4 (TP 4) or --quantization fp8 --max-model-len 9776 or --quantization awq --max-model-len 110144"),
    (["--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "A10"],
     "meta-llama/Llama-3.1-70B-Instruct does not fit on A10: weights 131.42 GiB per GPU + 1.18 GiB other memory "
     "leave no room for a KV cache in the 20.69 GiB vLLM may use (0.92 x 22.49 GiB); would fit with "
     "--gpu A10:16 (TP 16)"),
    (["--model", "Qwen3-8B", "--gpu", "L4", "--max-model-len", "131072"],
     "Qwen/Qwen3-8B does not fit on L4: its 4.49 GiB KV cache holds 32,688 tokens, not one request of 131,072; "
     "would fit with --gpu L4:2 (TP 2) or --quantization fp8 --max-model-len 79792 or --quantization awq "
     "--max-model-len 102416 or --max-model-len 32688"),
])
def test_a_plan_that_does_not_fit_says_why_and_what_would_in_one_line(argv, message, capsys):
    from servelab.cli.main import main

    assert main(["plan", *argv]) == 2
    assert capsys.readouterr() == ("", f"servelab: error: {message}\n")


def test_json_for_scripts(capsys):
    data = json.loads(run(capsys, "--max-model-len", "2048", "--json"))
    assert data["predicted"] is True
    assert data["memory_report"]["kv_cache_tokens"] == 46_592
    assert data["requests_at_once"] == 22 and data["weights_bytes"] == 269_030_016


def test_a_gpu_given_by_its_figures(capsys):
    out = run(capsys, "--model", "Qwen3-8B", "--gpu", "X9:2", "--gpu-memory-gib", "48", "--gpu-bandwidth-gbs", "1000")
    assert out.startswith("plan: Qwen/Qwen3-8B on X9 x2 (48.0 GiB each), vllm, weights 16-bit (not quantized), "
                          "KV auto, TP 2\n")
    assert "  compute-bound from  -\n" in out


@pytest.mark.parametrize("argv, message", [
    (["--model", "Qwen/Qwen3-8B", "--gpu", "H100:3"],
     "TP 3 does not split the 32 attention heads (8 KV heads) of Qwen/Qwen3-8B evenly, and vLLM refuses it: "
     "valid TP sizes 1, 2, 4, 8, 16, 32 (on 3 GPUs: --tensor-parallel-size 1, 3 replicas)"),
    (["--gpu", "X100"], "unknown GPU 'X100': pass --gpu-memory-gib and --gpu-bandwidth-gbs "
                        "(see --list-gpus for the table)"),
    (["--model", "no/such-model"], "unknown model 'no/such-model': pass a local folder or config.json path, a .gguf "
                                   "file, or a model from `servelab plan --list-models`"),
    (["--gpu", "H100:x"], "--gpu H100:x: COUNT must be a positive whole number"),
])
def test_unknown_input_is_one_line(argv, message, tmp_path):
    done = subprocess.run([sys.executable, "-m", "servelab.cli.main", "plan", *argv], capture_output=True, text=True,
                          env={"HF_HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)})
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"servelab: error: {message}\n")


def write_runs(folder, steps: dict[int, float], served_len: int | None = None) -> None:
    """One run per load: ``running`` requests at ``step`` seconds a step, 2 s of engine samples;
    with ``served_len``, a result beside it whose engine served that context."""
    from servelab.telemetry.timeline import Timeline, write

    for running, step in steps.items():
        samples = [{"t_ms": k * 250.0, "src": "engine", "running": float(running), "waiting": 0.0,
                    "generation_tokens": k * running * 0.25 / step, "prompt_tokens": 0.0} for k in range(8)]
        (folder / f"c{running}").mkdir()
        write(Timeline({"servelab_timeline": 1, "duration_s": 2.0}, samples), folder / f"c{running}/r.timeline.jsonl")
        if served_len:
            engine = {"args": [], "memory_report": {"max_concurrency_tokens": served_len}}
            (folder / f"c{running}/r.json").write_text(json.dumps({"servelab": {"engine": engine}}))


def test_calibrate_fits_the_runs_telemetry_and_holds_the_last_out(capsys, tmp_path):
    # Steps of 10 ms + 2 ms per running sequence (4 running: 18 ms a step); the last run held out.
    write_runs(tmp_path, {4: 0.018, 2: 0.014, 6: 0.022})
    out = run(capsys, "--max-model-len", "2048", "--gpu-bandwidth-gbs", "269.03", "--calibrate", str(tmp_path))
    assert out.split("calibrated step time (from measured runs)\n")[1] == (
        "  step model        9.00 ms + 2.000 ms per sequence + 0.000 ms per token + weight read 1.00 ms\n"
        "  fit error         +0.0% over 21 loaded intervals, 3 run(s)\n"
        f"  held-out error    +0.0% on {tmp_path}/c6/r.timeline.jsonl\n"
        "  TPOT at batch 1   12.00 ms (extrapolated)\n"
        "  TPOT at batch 8   26.00 ms (extrapolated)\n"
        "  TPOT at batch 32  74.00 ms (extrapolated)\n"
        "note: TPOT at batch 1, 8, 32: outside the loads the runs measured (2–6 running), extrapolated from the "
        "nearest along the fitted model\n")


def test_calibrate_reads_tpot_where_the_runs_measured_it_and_plans_their_context(capsys, tmp_path):
    # Runs at 1–8 running, concave (a line through them says 20.0 ms at batch 1); each served 2,048 tokens.
    write_runs(tmp_path, {1: 0.019, 2: 0.024, 4: 0.028, 8: 0.036}, served_len=2048)
    out = run(capsys, "--calibrate", str(tmp_path))
    assert "\nfits: 22 requests of 2,048 tokens at once\n" in out  # not the model's 8,192
    assert out.split("held-out error")[1].split("\n", 1)[1] == (
        "  TPOT at batch 1   19.00 ms (measured)\n"
        "  TPOT at batch 8   36.00 ms (measured)\n"
        "  TPOT at batch 32  94.21 ms (extrapolated)\n"
        "note: TPOT at batch 32: outside the loads the runs measured (1–8 running), extrapolated from the nearest "
        "along the fitted model\n"
        "note: the plan above is for the runs' max-model-len, 2,048 (pass --max-model-len for another)\n")
    asked = run(capsys, "--calibrate", str(tmp_path), "--max-model-len", "4096")
    assert "\nfits: 11 requests of 4,096 tokens at once\n" in asked and "the runs' max-model-len" not in asked


def test_calibrate_without_telemetry_is_one_line(tmp_path):
    from servelab.errors import InputError

    parser = argparse.ArgumentParser()
    plan.add_arguments(parser)
    with pytest.raises(InputError, match="no telemetry"):
        plan.run(parser.parse_args(["--calibrate", str(tmp_path)]))


def test_the_tables_list_every_entry(capsys):
    models = run(capsys, "--list-models")
    assert "HuggingFaceTB/SmolLM2-135M-Instruct" in models and "deepseek-ai/DeepSeek-V3" in models
    assert run(capsys, "--list-gpus").splitlines()[-1].startswith("cpu        machine")



def test_the_plan_drives_the_simulated_engine(tmp_path, capsys):
    """--sim-step-model: the planner's step model, written for the simulator, gives the same
    step time (weight read + per-token compute) and the printed flags carry the plan's KV cache."""
    from servelab.cli.main import main
    from servelab.sim.model import OVERLAP, overlapped
    from servelab.sim.options import load_step_model

    flags = ["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "A40", "--max-model-len", "4096"]
    assert main([*flags, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    path = tmp_path / "step.json"
    assert main([*flags, "--sim-step-model", str(path)]) == 0
    out = capsys.readouterr().out
    kv, step = plan["memory_report"]["kv_cache_tokens"], plan["speed_floor"]["step"]
    assert f"--sim-kv-cache-tokens {kv} " in out and f"--kv-cache-tokens {kv} " in out and "SIMULATED" in out
    sim = load_step_model(str(path))
    assert sim.source == ("planner roofline: Qwen/Qwen3-8B (servelab model table (planner/models.py)) on A40 x1 "
                          "(696 GB/s, 150 bf16 TFLOPS (planner/gpus.py)), weights 16-bit (not quantized); "
                          "expected error: roofline at peak: a lower bound of latency, an upper bound of throughput")
    for seqs, tokens in ((1, 1), (32, 32), (4, 2048)):
        planned = (step["overhead_s"] + step["per_seq_s"] * seqs
                   + overlapped(step["weight_read_s"], step["per_token_s"] * tokens, OVERLAP))
        assert sim.step_ns(seqs, tokens, 0) == round(planned * 1e9)


@pytest.fixture(scope="module")
def measured_runs(tmp_path_factory, qwen3_path):
    """Three 'measured' runs: made by the fast mode with a known step model, then relabelled as
    a vLLM's (the engine section a study writes), so the replay calibration has a truth to find."""
    import contextlib
    import io

    from servelab.flags.bench_serve import parse_bench_spec
    from servelab.measure.run import execute

    tmp_path = tmp_path_factory.mktemp("measured")
    for name, seqs, conc, n in (("c1", 128, 1, 4), ("c4", 128, 4, 8), ("s2c8", 2, 8, 8)):
        argv = ["--simulate", "--tokenizer", qwen3_path, "--dataset-name", "random", "--random-input-len", "64",
                "--random-output-len", "16", "--max-concurrency", str(conc), "--num-prompts", str(n),
                "--disable-tqdm", "--no-telemetry", "--save-result", "--result-dir", str(tmp_path / name),
                "--result-filename", "r0.json", "--sim-max-num-seqs", str(seqs), "--sim-kv-cache-tokens", "8192",
                "--sim-block-size", "128", "--sim-step-overhead-ms", "15", "--sim-step-per-seq-ms", "0.5",
                "--sim-step-per-token-ms", "0.3"]
        with contextlib.redirect_stdout(io.StringIO()):
            execute(parse_bench_spec(argv))
        path = tmp_path / name / "r0.json"
        result = json.loads(path.read_text())
        del result["servelab"]["simulated"]
        result["servelab"]["engine"] = {"kind": "vllm", "args": ["--max-num-seqs", str(seqs)],
                                        "memory_report": {"kv_cache_tokens": 8192, "block_size": 128}}
        path.write_text(json.dumps(result))
    return tmp_path


def test_calibrate_by_replay_fits_the_simulator_and_replays_the_held_out(measured_runs, capsys):
    out = run(capsys, "--calibrate", str(measured_runs / "c1"), str(measured_runs / "s2c8"),
              "--hold-out", str(measured_runs / "c4"), "--sim-step-model", str(measured_runs / "step.json"))
    assert "calibrated simulator (measured runs replayed; SIMULATED predictions, error against the repeats' range)" in out
    held = next(line for line in out.splitlines() if "| **held out** |" in line)
    assert held.startswith("| max_num_seqs 128, concurrency 4, rate inf, 8 requests of 64 prompt tokens | 1 |")
    assert "held out, worst error against the repeats' range: output tok/s " in out
    assert ("note: max_num_seqs 128, concurrency 4, rate inf, 8 requests of 64 prompt tokens: extrapolated: "
            "batch 4 outside the batches fitted (1–2)") in out  # s2c8 runs 2 at once, whatever its concurrency
    step = json.loads((measured_runs / "step.json").read_text())
    assert (step["overhead_s"], step["per_seq_s"], step["per_token_s"]) == pytest.approx((0.015, 0.0005, 0.0003),
                                                                                         rel=0.05)
    assert step["source"].startswith("calibrated by replaying measured runs through the simulator: ")
    assert "--max-num-seqs 128 " in out  # the written engine is the plan's (CPU defaults), not a run's


def test_a_replay_gives_what_bench_reported_for_the_same_step_model(measured_runs):
    """The replay's throughput, median TPOT and mean TTFT are bench's, by the same definitions."""
    from servelab.planner.replay import METRICS, load_observed, replay
    from servelab.sim.model import EngineLimits, StepModel

    truth = StepModel(overhead_s=0.015, per_seq_s=0.0005, per_token_s=0.0003)
    for observed in load_observed([measured_runs / name for name in ("c1", "c4", "s2c8")], EngineLimits()):
        predicted = replay(observed, truth)
        assert [predicted[k] for k, _ in METRICS] == pytest.approx([observed.measured[k] for k, _ in METRICS],
                                                                   rel=1e-6), observed.name


def test_hold_out_without_calibrate_is_one_line(capsys):
    from servelab.cli.main import main

    assert main(["plan", "--hold-out", "x"]) == 2
    assert capsys.readouterr().err == "servelab: error: --hold-out needs --calibrate: the runs to fit before replaying these\n"
