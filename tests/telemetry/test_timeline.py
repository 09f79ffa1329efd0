"""Merging samples onto one clock, the file format, and the result's summary."""

from __future__ import annotations

import pytest

from servelab.errors import InputError
from servelab.telemetry import timeline as tl
from servelab.telemetry.summary import increase, summarize

T0 = 1_000_000_000  # ns


def raw_run() -> list[dict]:
    """A scraper's lines and the client's samples, out of order, one before t0."""
    return [
        {"src": "meta", "t_ns": T0 - 500_000_000, "gpu": {"status": "NVML unavailable (x)", "devices": []}},
        {"src": "engine-meta", "t_ns": T0 - 300_000_000, "names": {"running": "vllm:num_requests_running"},
         "cache_config": {"block_size": "16"}},
        {"src": "engine", "t_ns": T0 + 500_000_000, "running": 4.0, "waiting": 2.0, "kv_usage": 0.5,
         "preemptions": 7.0, "generation_tokens": 300.0, "prefix_queries": 200.0, "prefix_hits": 50.0},
        {"src": "engine", "t_ns": T0 - 300_000_000, "running": 0.0, "waiting": 0.0, "kv_usage": 0.0,
         "preemptions": 5.0, "generation_tokens": 100.0, "prefix_queries": 100.0, "prefix_hits": 0.0},
        {"src": "engine", "t_ns": T0 + 750_000_000, "error": "HTTP 500"},
        {"src": "engine", "t_ns": T0 + 1_000_000_000, "running": 2.0, "waiting": 0.0, "kv_usage": 0.3,
         "preemptions": 8.0, "generation_tokens": 500.0, "prefix_queries": 300.0, "prefix_hits": 100.0},
        {"src": "client", "t_ns": T0, "in_flight": 6, "waiting": 0, "lag_ms": 0.0},
        {"src": "client", "t_ns": T0 + 600_000_000, "in_flight": 6, "waiting": 3, "lag_ms": 0.2, "cpu": 0.1},
    ]


def test_build_merges_on_one_clock_relative_to_t0():
    t = tl.build(raw_run(), T0, T0 + 2_000_000_000, 0.25, "http://x/metrics")
    assert [(s["t_ms"], s["src"]) for s in t.samples] == [
        (-300.0, "engine"), (0.0, "client"), (500.0, "engine"), (600.0, "client"), (750.0, "engine"),
        (1000.0, "engine")]
    assert t.header["engine"] == {"status": "ok", "names": {"running": "vllm:num_requests_running"},
                                  "cache_config": {"block_size": "16"}, "failed_scrapes": 1}
    assert t.header["gpu"] == {"status": "absent", "detail": "NVML unavailable (x)", "devices": []}
    assert t.header["duration_s"] == 2.0
    assert len(t.of("engine")) == 3 and len(t.during("engine")) == 2  # the failed scrape is left out


def test_an_engine_that_never_answered_is_absent_with_its_error():
    raw = [{"src": "meta", "t_ns": 0, "gpu": {"status": "ok", "devices": [{"index": 0}]}},
           {"src": "engine", "t_ns": 5, "error": "HTTP 404"}, {"src": "engine", "t_ns": 9, "error": "HTTP 404"}]
    t = tl.build(raw, 0, 10, 0.25, None)
    assert t.header["engine"] == {"status": "absent", "detail": "HTTP 404"}
    assert t.header["gpu"] == {"status": "ok", "devices": [{"index": 0}]}


def test_counter_increase_starts_from_the_last_sample_before_t0_and_survives_a_reset():
    t = tl.build(raw_run(), T0, T0 + 2_000_000_000, 0.25, None)
    assert increase(t, "preemptions") == 3.0  # 5 → 7 → 8
    t.samples.append({"t_ms": 1500.0, "src": "engine", "preemptions": 1.0})  # the server restarted
    t.samples.append({"t_ms": 1750.0, "src": "engine", "preemptions": 4.0})
    assert increase(t, "preemptions") == 6.0  # 3 before the reset + 3 after it
    assert increase(t, "not_a_field") is None


def test_a_short_run_without_samples_inside_is_bracketed_by_the_samples_around_it():
    """The scraper's sample before t0 and its closing one after the end still give the
    run's counters (a 1.6 s run on a busy machine may get no scrape inside)."""
    raw = [{"src": "engine-meta", "t_ns": T0 - 6_000_000, "names": {}, "cache_config": {}},
           {"src": "engine", "t_ns": T0 - 5_000_000, "prefix_queries": 100.0, "prefix_hits": 0.0},
           {"src": "engine", "t_ns": T0 + 3_000_000_000, "prefix_queries": 500.0, "prefix_hits": 100.0},
           {"src": "engine", "t_ns": T0 + 3_500_000_000, "prefix_queries": 900.0, "prefix_hits": 100.0}]
    t = tl.build(raw, T0, T0 + 2_000_000_000, 0.25, None)
    assert t.during("engine") == []
    assert increase(t, "prefix_queries") == 400.0  # to the first sample after the end, not the later one
    assert summarize(t)["engine"]["prefix_cache_hit_rate"] == 0.25


def test_summary():
    s = summarize(tl.build(raw_run(), T0, T0 + 2_000_000_000, 0.25, None))
    e = s["engine"]
    assert e["running"] == {"mean": 3.0, "median": 3.0, "max": 4.0}
    assert e["preemptions"] == 3.0 and e["generation_tokens"] == 400.0 and e["generation_tok_s"] == 200.0
    assert e["prefix_cache_hit_rate"] == 0.5  # (100 − 0) / (300 − 100)
    assert e["tokens_per_step"] is None and e["kv_usage"]["max"] == 0.5
    assert s["client"]["waiting"] == {"mean": 1.5, "median": 1.5, "max": 3} and s["client"]["cpu"]["max"] == 0.1
    assert s["gpu"] == {"status": "absent", "detail": "NVML unavailable (x)"}
    assert s["samples"] == {"engine": 2, "gpu": 0, "client": 2}


def engine_only(names: dict, samples: list[dict]) -> tl.Timeline:
    header = {"servelab_timeline": 1, "duration_s": 2.0, "engine": {"status": "ok", "names": names}}
    return tl.Timeline(header, [{"src": "engine", **x} for x in samples])


def test_prefix_hit_rate_from_llamacpp_cached_prompt_tokens():
    t = engine_only({"prompt_tokens_cached": "llamacpp:prompt_tokens_cached_total",
                     "prompt_tokens": "llamacpp:prompt_tokens_total"},
                    [{"t_ms": 0.0, "prompt_tokens": 10.0, "prompt_tokens_cached": 0.0},
                     {"t_ms": 2000.0, "prompt_tokens": 40.0, "prompt_tokens_cached": 90.0}])
    assert summarize(t)["engine"]["prefix_cache_hit_rate"] == 0.75  # 90 cached of 90 + 30 prompt tokens


def test_prefix_hit_rate_from_vllm_v0s_gauge_is_its_last_value_in_the_run():
    t = engine_only({"prefix_hit_rate_gauge": "vllm:gpu_prefix_cache_hit_rate"},
                    [{"t_ms": 500.0, "prefix_hit_rate_gauge": 0.2}, {"t_ms": 1500.0, "prefix_hit_rate_gauge": 0.4},
                     {"t_ms": 2500.0, "prefix_hit_rate_gauge": 0.9}])  # after the run: not counted
    assert summarize(t)["engine"]["prefix_cache_hit_rate"] == 0.4
    assert summarize(engine_only({}, [{"t_ms": 500.0, "running": 1.0}]))["engine"]["prefix_cache_hit_rate"] is None


def test_write_read_roundtrip_and_paths(tmp_path):
    t = tl.build(raw_run(), T0, T0 + 2_000_000_000, 0.25, "http://x/metrics")
    path = tl.timeline_path(tmp_path / "run.json", "20250101-000000", append=False)
    assert path == tmp_path / "run.timeline.jsonl"
    assert tl.timeline_path(tmp_path / "run.json", "20250101-000000", True).name == "run.20250101-000000.timeline.jsonl"
    tl.write(t, path)
    back = tl.read(path)
    assert back.header == t.header and back.samples == t.samples


def test_reading_something_else_is_an_input_error(tmp_path):
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"t_ms": 1}\n')
    with pytest.raises(InputError, match="not a servelab timeline"):
        tl.read(bad)
    with pytest.raises(InputError, match="cannot read"):
        tl.read(tmp_path / "missing.jsonl")
    bad.write_text('{"servelab_timeline": 1}\n{"t_ms": 1, "src": "engine"}\n{"t_ms": 2}\n')
    with pytest.raises(InputError, match='line 3: a sample needs "src" and a numeric "t_ms"'):
        tl.read(bad)
