"""``servelab bench --simulate``: the whole bench path, no server, labelled SIMULATED."""

import json

import pytest

from servelab.errors import InputError
from servelab.flags.bench_serve import parse_bench_spec
from servelab.measure.run import execute

LOAD = ["--dataset-name", "random", "--random-input-len", "200", "--random-output-len", "32",
        "--num-prompts", "64", "--max-concurrency", "32", "--disable-tqdm"]


def simulate(qwen3_path, *extra, tmp_path=None):
    argv = ["--simulate", "--tokenizer", qwen3_path, *LOAD, *extra]
    if tmp_path is not None:
        argv += ["--save-result", "--result-dir", str(tmp_path), "--result-filename", "r.json"]
    return execute(parse_bench_spec(argv))


def test_fast_mode_writes_a_labelled_result_of_the_usual_shape(qwen3_path, tmp_path, capsys):
    out = simulate(qwen3_path, "--sim-max-num-seqs", "8", tmp_path=tmp_path)
    console = capsys.readouterr().out
    assert "SIMULATED: no engine ran" in console
    assert "============ Serving Benchmark Result ============" in console
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["completed"] == 64 and result["total_output_tokens"] == 64 * 32
    sim = result["servelab"]["simulated"]
    assert sim["mode"] == "fast" and sim["limits"]["max_num_seqs"] == 8
    assert sim["step_model"]["overhead_s"] == pytest.approx(0.002)
    assert result["servelab"]["engine"]["kind"] == "sim"
    assert (tmp_path / "r.timeline.jsonl").is_file()
    assert out.exit_code == 0


def test_more_seqs_more_throughput_and_less_ttft(qwen3_path):
    two = simulate(qwen3_path, "--sim-max-num-seqs", "2").result
    many = simulate(qwen3_path, "--sim-max-num-seqs", "32").result
    assert many["output_throughput"] > 3 * two["output_throughput"]
    assert many["mean_ttft_ms"] < two["mean_ttft_ms"] / 3


def test_diagnosis_of_a_max_num_seqs_2_run_at_32_streams_is_scheduler_cap(qwen3_path):
    result = simulate(qwen3_path, "--sim-max-num-seqs", "2").result
    diagnosis = result["servelab"]["diagnosis"]
    assert diagnosis["verdict"] == "scheduler-cap", diagnosis


def test_the_same_seed_gives_the_same_numbers(qwen3_path):
    a = simulate(qwen3_path, "--request-rate", "20").result
    b = simulate(qwen3_path, "--request-rate", "20").result
    assert a["mean_ttft_ms"] == b["mean_ttft_ms"] and a["duration"] == b["duration"]


def test_a_bad_engine_flag_is_one_input_error(qwen3_path):
    with pytest.raises(InputError, match="max_num_seqs"):
        simulate(qwen3_path, "--sim-max-num-seqs", "0")


def test_shared_prefixes_hit_the_prefix_cache_unless_it_is_off(qwen3_path):
    load = ["--simulate", "--tokenizer", qwen3_path, "--dataset-name", "prefix_repetition",
            "--prefix-repetition-prefix-len", "512", "--prefix-repetition-suffix-len", "32",
            "--prefix-repetition-num-prefixes", "2", "--prefix-repetition-output-len", "16",
            "--num-prompts", "32", "--max-concurrency", "8", "--disable-tqdm"]
    on = execute(parse_bench_spec(load)).result
    off = execute(parse_bench_spec([*load, "--sim-no-enable-prefix-caching"])).result
    hits = on["servelab"]["simulated"]["counters"]["prefix_cache_hits"]
    assert hits > 0.8 * 30 * 512  # all but the first request of each prefix reuse most of it
    assert off["servelab"]["simulated"]["counters"]["prefix_cache_hits"] == 0
    assert off["mean_ttft_ms"] > 1.5 * on["mean_ttft_ms"]
