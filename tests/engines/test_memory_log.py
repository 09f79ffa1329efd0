"""Golden tests for the memory report: real startup lines in, expected report out.

Each ``golden/<case>.log.txt`` (a log excerpt) or ``golden/<case>.metrics.txt``
(Prometheus text) has ``golden/<case>.log.json`` / ``.metrics.json`` beside it. To regenerate after a
deliberate change: SERVELAB_REGEN_GOLDEN=1 pytest tests/engines/test_memory_log.py
— that run rewrites the .json files and fails, so a regeneration is never a pass.
"""

import json
import os
from pathlib import Path

import pytest

from servelab.engines.memory import (
    MemoryReport,
    parse_cache_config_info,
    parse_memory_report,
    with_cache_info,
)

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(GOLDEN.glob("*.txt"))
REGEN = os.environ.get("SERVELAB_REGEN_GOLDEN") == "1"


def expected_for(case: Path) -> Path:
    return case.with_suffix(".json")  # x.log.txt -> x.log.json


def parse(path: Path) -> dict:
    text = path.read_text()
    if path.name.endswith(".metrics.txt"):
        return parse_cache_config_info(text)
    return parse_memory_report(text).to_dict()


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_golden(case):
    expected_path = expected_for(case)
    got = parse(case)
    if REGEN:
        expected_path.write_text(json.dumps(got, indent=2) + "\n")
        pytest.fail(f"regenerated {expected_path.name}; rerun without SERVELAB_REGEN_GOLDEN")
    assert got == json.loads(expected_path.read_text())


def test_every_golden_has_an_expectation():
    assert {expected_for(p) for p in CASES} == set(GOLDEN.glob("*.json"))


def test_the_real_cpu_line_parses_in_full():
    line = ("(EngineCore pid=6401) INFO 11-29 19:25:18 [kv_cache_utils.py:2327] CPU KV cache size: "
            "46,592 tokens, Maximum concurrency for 2,048 tokens per request: 22.75x")
    assert parse_memory_report(line) == MemoryReport(
        kv_cache_tokens=46592, max_concurrency=22.75, max_concurrency_tokens=2048)


def test_earlier_table_rows_win_over_earlier_log_lines():
    # "Loading weights took" comes first in the log, but "Model loading took" covers the whole load.
    log = "Loading weights took 24.84 seconds\nModel loading took 12.66 GiB memory and 31.657031 seconds\n"
    assert parse_memory_report(log).load_time_s == 31.657031


def test_nothing_said_means_none_not_zero():
    assert parse_memory_report("INFO nothing to see\n") == MemoryReport()
    assert MemoryReport().to_dict() == dict.fromkeys(
        ["weights_gib", "load_time_s", "kv_cache_gib", "kv_cache_tokens", "max_concurrency",
         "max_concurrency_tokens", "num_gpu_blocks", "block_size", "slots", "context_per_slot", "dtype",
         "dtype_reason"])


def test_llamacpp_sums_its_buffers_and_kv_caches():
    # A model split over a GPU and the CPU, and a sliding-window model's two KV caches.
    log = ("load_tensors:        CUDA0 model buffer size =  4403.49 MiB\n"
           "load_tensors:   CPU_Mapped model buffer size =   281.81 MiB\n"
           "llama_kv_cache: size =  512.00 MiB (  1024 cells,  26 layers,  4/4 seqs), K (f16): …\n"
           "llama_kv_cache: size =  256.00 MiB (   512 cells,  26 layers,  4/4 seqs), K (f16): …\n"
           "srv    load_model: initializing, n_slots = 4, n_ctx_slot = 1024, kv_unified = 'false'\n")
    report = parse_memory_report(log)
    assert report.weights_gib == round((4403.49 + 281.81) / 1024, 6)
    assert report.kv_cache_gib == 0.75 and report.kv_cache_tokens == 4096
    assert (report.slots, report.context_per_slot, report.max_concurrency, report.max_concurrency_tokens) == (
        4, 1024, 4.0, 1024)


def test_metrics_complete_but_never_override_the_log():
    report = MemoryReport(kv_cache_tokens=100)
    merged = with_cache_info(report, {"kv_cache_tokens": 999, "num_gpu_blocks": 7, "block_size": 16})
    assert (merged.kv_cache_tokens, merged.num_gpu_blocks, merged.block_size) == (100, 7, 16)


def test_no_cache_info_metric_gives_nothing():
    assert parse_cache_config_info("vllm:num_requests_running 0.0\n") == {}


def test_cache_info_labels_are_read_whole_whatever_their_values_hold():
    """A brace or an escaped quote inside a label value does not end the labels."""
    text = ('vllm:cache_config_info{cache_dtype="a}b",prefix="say \\"hi\\"",num_gpu_blocks="364",'
            'block_size="128"} 1.0\n')
    assert parse_cache_config_info(text) == {"num_gpu_blocks": 364, "block_size": 128}


def test_a_malformed_cache_info_line_leaves_the_report_to_the_log():
    assert parse_cache_config_info('vllm:cache_config_info{block_size=128} 1.0\n') == {}


def test_the_one_line_report_says_what_fits_and_what_it_costs():
    from servelab.engines import MemoryReport

    report = MemoryReport(kv_cache_tokens=46592, kv_cache_gib=1.0, max_concurrency=22.75,
                          max_concurrency_tokens=2048, weights_gib=None)
    assert report.line() == "KV cache 46,592 tokens (1.00 GiB) · 22.75 requests of 2,048 tokens fit"
    assert MemoryReport(weights_gib=12.66).line() == "weights 12.66 GiB"
    assert MemoryReport().line() == "no memory report in its log"


# vLLM 0.32's CPU build, started by servelab on this machine (2026-12-05), as its log printed it
STATED_LINE = ("(APIServer pid=4139) INFO 12-05 14:36:24 [api_utils.py:286] non-default args: {'host': '127.0.0.1', "
               "'port': 41173, 'model': '/root/.cache/servelab/models/SmolLM2-135M-Instruct', 'dtype': 'float32', "
               "'max_model_len': 2048, 'enforce_eager': True, 'max_num_seqs': 2}")


def test_the_args_vllm_says_it_was_given_are_read_from_its_log():
    from servelab.engines.memory import parse_stated_args

    assert parse_stated_args("INFO start\n" + STATED_LINE + "\nINFO more") == {
        "host": "127.0.0.1", "port": 41173, "model": "/root/.cache/servelab/models/SmolLM2-135M-Instruct",
        "dtype": "float32", "max_model_len": 2048, "enforce_eager": True, "max_num_seqs": 2}
    # a value that is no literal (an enum's repr) costs only itself; nested dicts and None are left out
    odd = ("non-default args: {'model_tag': 'a, b', 'max_num_seqs': 64, 'compilation_config': {'level': 3, "
           "'x': 1}, 'tp': <Foo.BAR: 1>, 'seed': None, 'max_num_batched_tokens': 8192}")
    assert parse_stated_args(odd) == {"model_tag": "a, b", "max_num_seqs": 64, "max_num_batched_tokens": 8192}
    assert parse_stated_args("a llama.cpp log") == {}


def test_a_cap_set_outside_the_command_line_is_known_to_the_diagnosis():
    """A --config YAML (or an image's entrypoint) set it: the flags do not say, vLLM's log does."""
    from servelab.diagnose.evidence import facts_from_result

    stated = {"max_num_seqs": 2, "max_num_batched_tokens": 512, "tensor_parallel_size": 2}
    facts = facts_from_result({"servelab": {"engine": {"args": ["--config", "x.yaml"], "stated_args": stated}}})
    assert (facts.max_num_seqs, facts.max_num_batched_tokens, facts.tensor_parallel) == (2, 512, 2)
    given = facts_from_result({"servelab": {"engine": {"args": ["--max-num-seqs", "8"], "stated_args": stated}}})
    assert given.max_num_seqs == 8  # the flag the run recorded wins
