"""Metric names → timeline fields: vLLM new and old, llama.cpp, data-parallel engines."""

from __future__ import annotations

from pathlib import Path

from servelab.telemetry import engine, names
from servelab.telemetry.prometheus import parse

GOLDEN = Path(__file__).parent / "golden"


def sample(text: str):
    return engine.sample(text)


def test_vllm_032_fields_and_names():
    values, used, cache = sample((GOLDEN / "vllm-0.32-cpu-loaded.metrics").read_text())
    assert values == {
        "running": 2.0, "waiting": 4.0, "waiting_capacity": 4.0, "kv_usage": 0.0055096418732781816,
        "preemptions": 0.0, "prompt_tokens": 36.0, "generation_tokens": 161.0, "prefix_queries": 36.0,
        "prefix_hits": 0.0, "prompt_tokens_cached": 0.0, "iteration_tokens_sum": 197.0,
        "iteration_tokens_count": 81.0, "requests_finished": 2.0}
    assert used["kv_usage"] == "vllm:kv_cache_usage_perc" and used["waiting_capacity"] == "vllm:num_requests_waiting_by_reason"
    assert cache == {"block_size": "128", "num_gpu_blocks": "364", "kv_cache_size_tokens": "46592",
                     "cache_dtype": "auto", "enable_prefix_caching": "True", "gpu_memory_utilization": "0.92"}


def test_the_newest_vllm_name_of_every_field_is_in_the_real_capture():
    """When the golden is re-captured from a newer vLLM, a rename fails here."""
    exposed = set(parse((GOLDEN / "vllm-0.32-cpu-loaded.metrics").read_text()).samples)
    v0_only = {"swapped", "prefix_hit_rate_gauge"}
    for table in (names.GAUGES, names.COUNTERS):
        for field, candidates in table.items():
            vllm = [c if isinstance(c, str) else c[0] for c in candidates]
            vllm = [c for c in vllm if c.startswith("vllm:")]
            if vllm and field not in v0_only:
                assert vllm[0] in exposed, f"{field}: {vllm[0]} is not exposed by vLLM 0.32"


def test_old_vllm_names():
    text = "\n".join(['vllm:num_requests_running{engine="0"} 3', 'vllm:num_requests_swapped{engine="0"} 1',
                      'vllm:gpu_cache_usage_perc{engine="0"} 0.91', 'vllm:gpu_prefix_cache_queries_total{engine="0"} 40',
                      'vllm:gpu_prefix_cache_hits_total{engine="0"} 10', 'vllm:gpu_prefix_cache_hit_rate{engine="0"} 0.25'])
    values, used, _ = sample(text)
    assert values == {"running": 3.0, "swapped": 1.0, "kv_usage": 0.91, "prefix_queries": 40.0, "prefix_hits": 10.0,
                      "prefix_hit_rate_gauge": 0.25}
    assert used["kv_usage"] == "vllm:gpu_cache_usage_perc" and used["prefix_hits"] == "vllm:gpu_prefix_cache_hits_total"


def test_when_both_names_are_exposed_the_new_one_wins():
    values, used, _ = sample("vllm:kv_cache_usage_perc 0.5\nvllm:gpu_cache_usage_perc 0.4\n")
    assert values["kv_usage"] == 0.5 and used["kv_usage"] == "vllm:kv_cache_usage_perc"


def test_llamacpp_real_capture():
    values, used, cache = sample((GOLDEN / "llamacpp-xllamacpp-2026.10-loaded.metrics").read_text())
    assert values == {"running": 2.0, "waiting": 4.0, "prompt_tokens": 18.0, "generation_tokens": 0.0,
                      "prompt_tokens_cached": 0.0, "decode_calls": 20.0}
    assert used["running"] == "llamacpp:requests_processing" and "kv_usage" not in values and cache == {}


def test_older_llamacpp_kv_ratio():
    values, used, _ = sample("llamacpp:kv_cache_usage_ratio 0.75\nllamacpp:requests_processing 1\n")
    assert values["kv_usage"] == 0.75 and used["kv_usage"] == "llamacpp:kv_cache_usage_ratio"


def test_data_parallel_engines_sum_counts_and_average_usage():
    text = "\n".join(['vllm:num_requests_running{engine="0"} 3', 'vllm:num_requests_running{engine="1"} 5',
                      'vllm:kv_cache_usage_perc{engine="0"} 0.2', 'vllm:kv_cache_usage_perc{engine="1"} 0.6',
                      'vllm:request_success_total{finished_reason="stop"} 4',
                      'vllm:request_success_total{finished_reason="length"} 6'])
    values, _, _ = sample(text)
    assert values["running"] == 8.0 and values["kv_usage"] == 0.4 and values["requests_finished"] == 10.0


def test_labelled_candidates_filter_on_their_labels():
    text = ('vllm:num_requests_waiting_by_reason{reason="capacity"} 5\n'
            'vllm:num_requests_waiting_by_reason{reason="deferred"} 2\n')
    assert sample(text)[0] == {"waiting_capacity": 5.0}


def test_an_empty_or_foreign_page_gives_no_fields():
    assert sample("") == ({}, {}, {})
    assert sample("python_gc_objects_collected_total 3\n")[0] == {}
