"""The sim engine's flags: one definition, prefixed for bench, vLLM-named for the server."""

import argparse
import json

import pytest

from servelab.errors import InputError
from servelab.sim.model import EngineLimits, StepModel
from servelab.sim.options import add_engine_arguments, engine_from_flags, from_args, given, simulable, to_argv


def parse(argv, prefix=""):
    p = argparse.ArgumentParser()
    add_engine_arguments(p, prefix)
    return from_args(p.parse_args(argv))


def test_server_flags_round_trip_through_to_argv():
    limits = EngineLimits(max_num_seqs=3, max_num_batched_tokens=512, num_blocks=10, block_size=32,
                          enable_prefix_caching=False)
    model = StepModel(overhead_s=0.004, per_seq_s=0.0002, per_token_s=0.00001, floor_s=0.003, read_s=0.006,
                      overlap=3.0)
    got_limits, got_model = parse(to_argv(limits, model))
    assert got_limits == limits
    assert got_model.to_dict() == pytest.approx(model.to_dict())


def test_bench_flags_are_prefixed_and_kv_tokens_round_down_to_blocks():
    limits, _ = parse(["--sim-kv-cache-tokens", "1000", "--sim-block-size", "128"], prefix="sim-")
    assert limits.num_blocks == 7 and limits.kv_tokens == 896


def test_a_step_model_file_replaces_the_step_flags(tmp_path):
    path = tmp_path / "calib.json"
    path.write_text(json.dumps({"overhead_s": 0.03, "per_token_s": 0.001}))
    _, model = parse(["--step-model", str(path), "--step-overhead-ms", "1"])
    assert model.overhead_s == 0.03 and model.per_token_s == 0.001 and model.source == "calib.json"


@pytest.mark.parametrize("text", ['{"overhead": 1}', "[1]", "not json", '{"overhead_s": -1}'])
def test_a_bad_step_model_file_is_one_input_error(tmp_path, text):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(InputError, match="step model"):
        parse(["--step-model", str(path)])


@pytest.mark.parametrize("argv,on", [([], True), (["--no-enable-prefix-caching"], False),
                                     (["--no-enable-prefix-caching", "--enable-prefix-caching"], True)])
def test_prefix_caching_is_on_by_default_and_the_last_switch_wins(argv, on):
    limits, _ = parse(argv)
    assert limits.enable_prefix_caching is on


def test_an_moe_step_model_round_trips_through_the_flags_and_a_dense_one_carries_none_of_them():
    limits = EngineLimits()
    moe = StepModel(overhead_s=0.004, read_s=0.002, expert_read_s=0.00004, expert_token_s=0.000002,
                    experts=128, active_experts=8)
    argv = to_argv(limits, moe)
    assert argv[argv.index("--num-experts") + 1] == "128" and "--num-experts-per-tok" in argv
    assert parse(argv)[1] == moe
    assert "--num-experts" not in to_argv(limits, StepModel())
    assert parse(["--sim-num-experts", "64", "--sim-num-experts-per-tok", "6"], prefix="sim-")[1].experts == 64
    # a step whose only cost is reading the experts still takes time; a wrong pair of counts is refused
    assert StepModel(overhead_s=0, per_seq_s=0, per_token_s=0, expert_read_s=0.001, experts=8, active_experts=2)
    for experts, active in ((8, 0), (8, 9), (0, 2)):
        with pytest.raises(InputError, match="active_experts <= experts"):
            StepModel(expert_read_s=0.001, experts=experts, active_experts=active)
    with pytest.raises(InputError, match="whole numbers"):
        StepModel(experts=8, active_experts=2.5)


def test_a_spec_s_given_values_then_an_engine_s_flags_build_the_engine():
    p = argparse.ArgumentParser()
    add_engine_arguments(p, "sim-")
    args = p.parse_args(["--sim-step-overhead-ms", "20", "--sim-max-num-seqs", "4", "--sim-kv-cache-tokens", "1000"])
    values = given(args)
    assert values == (("sim_max_num_seqs", 4), ("sim_kv_cache_tokens", 1000), ("sim_step_overhead_ms", 20.0))
    assert engine_from_flags(values) == from_args(args)
    limits, model = engine_from_flags(values, ["--max-num-seqs", "8", "--block-size", "128"])
    assert (limits.max_num_seqs, limits.kv_tokens, model.overhead_s) == (8, 896, 0.02)  # 1000 in 128-token blocks
    assert engine_from_flags() == parse([])
    assert engine_from_flags(flags=["--port", "1", "--max-num-seqs", "3"], known_only=True)[0].max_num_seqs == 3
    with pytest.raises(InputError, match="--port 1 is not a flag it takes"):
        engine_from_flags(flags=["--port", "1"])
    with pytest.raises(InputError, match="invalid int value"):
        engine_from_flags(flags=["--max-num-seqs", "many"])


def test_the_knobs_it_models_in_vllm_s_spelling():
    assert simulable("--max-num-seqs") and simulable("--no-enable-prefix-caching")
    assert not simulable("--gpu-memory-utilization") and not simulable("--no-max-num-seqs")
    assert not simulable("max-num-seqs")
