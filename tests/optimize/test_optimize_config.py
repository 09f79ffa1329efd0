"""How a change from the knob table moves a configuration: values, ceilings, companions."""

from servelab.diagnose.changes import BATCHED, CONCURRENCY_SEQS, CPU_KV, KV_FP8, PARALLEL, SEQS
from servelab.optimize.config import Config, Move, apply, current, next_value, set_flag


def test_the_schedule_doubles_sets_and_stops_at_the_ceiling():
    assert next_value(SEQS, "2") == "4" and next_value(SEQS, "1024") is None
    assert next_value(KV_FP8, "auto") == "fp8" and next_value(KV_FP8, "fp8") is None
    assert next_value(BATCHED, None) is None and next_value(SEQS, "many") is None


def test_the_current_value_is_as_given_else_as_reported_else_the_default():
    config = Config(("--max-num-seqs", "8"), {"VLLM_CPU_KVCACHE_SPACE": "2"}, 4)
    assert current(config, SEQS, {"max_num_seqs": 2}) == "8"
    assert current(Config(), SEQS, {"max_num_seqs": 2}) == "2"
    assert current(Config(), BATCHED, {}) == "2048"
    assert current(config, CPU_KV, {}) == "2" and current(Config(), CPU_KV, {}) == "1"


def test_a_flag_is_replaced_in_either_spelling_and_companions_move_with_it():
    assert set_flag(("--a", "1", "--max-num-seqs=2", "--b"), "--max-num-seqs", "4") == ("--a", "1", "--b",
                                                                                          "--max-num-seqs", "4")
    moved = apply(Config(("--parallel", "2", "--ctx-size", "4096")), Move(PARALLEL, "2", "4"))
    assert moved.engine_args == ("--parallel", "4", "--ctx-size", "8192")
    both = apply(Config((), {}, 4), Move(CONCURRENCY_SEQS, "4", "8"), {"max_num_seqs": 4})
    assert both.max_concurrency == 8 and both.engine_args == ("--max-num-seqs", "8")
    env = apply(Config(), Move(CPU_KV, "1", "2"))
    assert env.env == {"VLLM_CPU_KVCACHE_SPACE": "2"} and Config.from_dict(env.to_dict()) == env


def test_a_finite_rate_the_engine_keeps_up_with_turns_throughput_into_latency(tmp_path, plan_of):
    import dataclasses

    from servelab.optimize.loop import objective_for
    from servelab.optimize.steps import Seen

    plan = plan_of(tmp_path, "rate")
    at_rate = dataclasses.replace(plan, spec=dataclasses.replace(
        plan.spec, load=dataclasses.replace(plan.spec.load, request_rate=2.0)))
    kept_up = Seen(Config(), {"request_throughput": (1.95, 1.97)}, "no-limit-found", {}, ())
    behind = Seen(Config(), {"request_throughput": (1.2, 1.3)}, "scheduler-cap", {}, ())
    latency = objective_for(at_rate, kept_up)
    assert latency["kind"] == "latency"
    assert latency["why"] == ("finite --request-rate 2 below capacity (served 1.96 req/s): throughput is flat, "
                              "optimising mean TTFT")
    assert objective_for(dataclasses.replace(at_rate, slo={"p99_ttft": 500.0}), kept_up)["kind"] == "goodput"
    assert objective_for(at_rate, behind)["kind"] == "throughput"
    assert objective_for(plan, kept_up)["kind"] == "throughput"  # rate inf: nothing to keep up with


def test_the_next_command_runs_each_replica_at_the_operating_point_on_the_measured_port(tmp_path, plan_of):
    """Item 9 of issue 34: "Next: N replicas" at the operating point's concurrency (not the final
    client's), with the --port the engine was measured on."""
    from servelab.optimize.plan import final_section

    plan = plan_of(tmp_path, "x", port=8123)
    best = {"config": Config(("--max-num-seqs", "4"), {}, 2).to_dict(), "result": {"output_tok_s": 9.0}, "n": 0}
    at_op = final_section(plan, best, {"over": "concurrency", "load": 4})["next"]
    assert "--max-concurrency 4" in at_op["scale_command"] and "--port 8123" in at_op["scale_command"]
    assert at_op["at"] == "the operating point"
    alone = final_section(plan, best)["next"]
    assert "--max-concurrency 2" in alone["scale_command"] and alone["at"] == "the final client settings"


def test_a_knobs_value_says_where_it_was_read():
    """Item 5: set by the user (engine args, a command line), by a kept step, reported, or a default."""
    from servelab.optimize.config import known

    base = Config(("--max-num-seqs", "4"))
    assert known(base, SEQS, {}, base, frozenset({"--max-num-seqs"})) == ("4", "command line")
    assert known(base, SEQS, {}, base) == ("4", "engine args")
    assert known(Config(("--max-num-seqs", "8")), SEQS, {}, base) == ("8", "set by a kept step")
    assert known(Config(), SEQS, {"max_num_seqs": 6}, Config()) == ("6", "diagnosis evidence")
    assert known(Config(), SEQS, {}, Config()) == ("256", "engine default, not observed")


def test_the_engines_own_metrics_beat_the_tables_default(tmp_path):
    """Item 5: vLLM states --gpu-memory-utilization and the KV dtype in ``cache_config_info``; the
    run's telemetry keeps the labels, and a change steps from them, not from the table's 0.9."""
    from servelab.diagnose.changes import GPU_UTIL
    from servelab.optimize.config import known
    from servelab.optimize.measure import engine_reported
    from servelab.telemetry.timeline import Timeline, write

    header = {"servelab_timeline": 1, "engine": {"status": "ok", "cache_config": {
        "gpu_memory_utilization": "0.92", "cache_dtype": "auto", "block_size": "16"}}}
    write(Timeline(header), tmp_path / "result.timeline.jsonl")
    reported = engine_reported(tmp_path, {})
    assert reported == {"--gpu-memory-utilization": "0.92", "--kv-cache-dtype": "auto"}
    assert known(Config(), GPU_UTIL, {}, Config(), reported=reported) == ("0.92", "engine metrics (cache_config_info)")
    assert known(Config(("--gpu-memory-utilization", "0.8")), GPU_UTIL, {}, reported=reported).value == "0.8"
    assert engine_reported(tmp_path / "none", {}) == {}


def test_a_gpu_engines_defaults_follow_its_gpu_as_vllm_sets_them():
    """vLLM's API server takes 1024 sequences and 8192 batched tokens on a GPU of 70 GiB or more (not an
    A100), 16384 tokens from 160 GiB, else 256 / 2048 (EngineArgs.get_batch_defaults): a knob left at
    its default steps from the engine's, not from the table's smaller GPU."""
    from servelab.optimize.config import engine_defaults, known

    h100 = engine_defaults("vllm", ("NVIDIA H100 80GB HBM3", 79.6))
    where = "vLLM 0.32's default on NVIDIA H100 80GB HBM3 (80 GiB), not observed"
    assert known(Config(), SEQS, {}, Config(), defaults=h100) == ("1024", where)
    assert known(Config(), BATCHED, {}, Config(), defaults=h100) == ("8192", where)
    assert next_value(SEQS, h100["--max-num-seqs"].value) is None  # already at the table's ceiling
    b200 = engine_defaults("vllm", ("NVIDIA B200", 179.1))
    assert (b200["--max-num-seqs"].value, b200["--max-num-batched-tokens"].value) == ("1024", "16384")
    a100 = engine_defaults("vllm", ("NVIDIA A100-SXM4-80GB", 79.2))
    assert (a100["--max-num-seqs"].value, a100["--max-num-batched-tokens"].value) == ("256", "2048")
    # what the engine states beats any default; the CPU build and other kinds keep the table's
    assert known(Config(), SEQS, {"max_num_seqs": 6}, Config(), defaults=h100).value == "6"
    assert engine_defaults("vllm-cpu", ("NVIDIA H100 80GB HBM3", 79.6)) == {} == engine_defaults("vllm", None)


def test_on_an_h100_the_loop_steps_the_token_budget_up_from_8192_not_down_from_the_tables_2048(plan_of, tmp_path):
    """Before, a plateau on an H100 stepped --max-num-seqs 256 → 512 and the budget 2048 → 4096: both
    below what the engine already ran with."""
    import dataclasses

    from servelab.optimize.loop import State, untried
    from servelab.optimize.steps import Seen

    plan = dataclasses.replace(plan_of(tmp_path, "h100"), kind="vllm", fast=False,
                               device=("NVIDIA H100 80GB HBM3", 79.6))
    state = State(plan, None, {}, [], print)
    best = Seen(Config((), {}, 2048), {}, "scheduler-cap", {"limit": "plateau", "plateau": 1024}, ())
    moves = [(m.change.name, m.old, m.new, m.source) for m in untried(state, best)]
    assert moves == [("--max-num-batched-tokens", "8192", "16384",
                      "vLLM 0.32's default on NVIDIA H100 80GB HBM3 (80 GiB), not observed")]


def test_optimize_reads_the_gpu_a_vllm_engine_serves_from(monkeypatch, plan_of, tmp_path):
    import dataclasses

    from servelab.optimize import run as optimize_run

    monkeypatch.setattr(optimize_run, "gpu_devices", lambda: [{"name": "NVIDIA H200", "memory_total_gib": 139.8}])
    vllm = dataclasses.replace(plan_of(tmp_path, "x"), kind="vllm")
    assert optimize_run.with_engine_gpu(vllm).device == ("NVIDIA H200", 139.8)
    assert optimize_run.with_engine_gpu(plan_of(tmp_path, "x")).device is None  # the sim has no GPU defaults
    monkeypatch.setattr(optimize_run, "gpu_devices", lambda: [])
    assert optimize_run.with_engine_gpu(vllm).device is None
