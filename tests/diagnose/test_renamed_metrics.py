"""Old and new metric names reach the same verdict: the rules never see names."""

from __future__ import annotations

from diag_timelines import client_at, make_timeline, run

from servelab.telemetry import engine

LABELS = 'engine="0",model_name="m"'


def old_vllm_text(i: int) -> str:
    """A V0 / early-V1 server: gpu_cache_usage_perc and gpu_prefix_cache_*."""
    return "\n".join([
        f"vllm:num_requests_running{{{LABELS}}} {9 + i % 2}",
        f"vllm:num_requests_waiting{{{LABELS}}} 7",
        f"vllm:gpu_cache_usage_perc{{{LABELS}}} 0.985",
        f"vllm:num_preemptions_total{{{LABELS}}} {3 * i}",
        f"vllm:gpu_prefix_cache_queries_total{{{LABELS}}} {100 * i}",
        f"vllm:gpu_prefix_cache_hits_total{{{LABELS}}} {25 * i}",
    ])


def new_vllm_text(i: int) -> str:
    return (old_vllm_text(i).replace("gpu_cache_usage_perc", "kv_cache_usage_perc")
            .replace("gpu_prefix_cache", "prefix_cache"))


def timeline_from(text_of):
    scrapes = [engine.sample(text_of(i)) for i in range(40)]
    return make_timeline(client=client_at(32), engine=lambda i: scrapes[i][0], names=scrapes[0][1])


def test_old_and_new_names_give_the_same_verdict_and_numbers():
    old, new = run(timeline_from(old_vllm_text), max_concurrency=32), run(timeline_from(new_vllm_text), max_concurrency=32)
    assert old.top.id == new.top.id == "kv-capacity"
    assert old.top.evidence == new.top.evidence
    assert old.top.evidence["kv_usage_max"] == 0.985 and old.top.evidence["preemptions"] == 3 * 39


def test_the_timeline_says_which_name_was_read():
    assert timeline_from(old_vllm_text).header["engine"]["names"]["kv_usage"] == "vllm:gpu_cache_usage_perc"
    assert timeline_from(new_vllm_text).header["engine"]["names"]["kv_usage"] == "vllm:kv_cache_usage_perc"
