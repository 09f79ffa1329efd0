"""The Prometheus text parser, on real ``/metrics`` captures and on the format's corners."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from servelab.telemetry.prometheus import parse, parse_sample

GOLDEN = Path(__file__).parent / "golden"


def golden(name: str) -> str:
    return (GOLDEN / name).read_text()


def test_real_vllm_capture():
    """vLLM 0.32 CPU build serving SmolLM2, --max-num-seqs 2, 8 requests sent."""
    expo = parse(golden("vllm-0.32-cpu-loaded.metrics"))
    model = "/root/.cache/servelab/models/SmolLM2-135M-Instruct"
    assert expo.get("vllm:num_requests_running") == [({"engine": "0", "model_name": model}, 2.0)]
    assert expo.get("vllm:num_requests_waiting")[0][1] == 4.0
    assert expo.types["vllm:num_requests_running"] == "gauge"
    assert expo.types["vllm:iteration_tokens_total"] == "histogram"
    buckets = expo.get("vllm:iteration_tokens_total_bucket")
    assert buckets[-1][0]["le"] == "+Inf" and buckets[-1][1] == 81.0
    info = expo.get("vllm:cache_config_info")[0][0]
    assert info["kv_cache_size_tokens"] == "46592" and info["kv_offloading_size"] == "None"


def test_real_llamacpp_capture():
    """xllamacpp's embedded llama-server, 2 slots, 6 requests sent (counters carry no labels)."""
    expo = parse(golden("llamacpp-xllamacpp-2026.10-loaded.metrics"))
    assert expo.get("llamacpp:requests_processing") == [({}, 2.0)]
    assert expo.get("llamacpp:requests_deferred") == [({}, 4.0)]
    assert expo.types["llamacpp:prompt_tokens_total"] == "counter"


def test_every_sample_line_of_the_captures_parses():
    for name in ("vllm-0.32-cpu-loaded.metrics", "vllm-0.32-cpu-idle.metrics",
                 "llamacpp-xllamacpp-2026.10-loaded.metrics"):
        text = golden(name)
        lines = [x for x in text.splitlines() if x.strip() and not x.startswith("#")]
        assert sum(len(v) for v in parse(text).samples.values()) == len(lines), name


@pytest.mark.parametrize("line, expected", [
    ('a{x="1,2",y="}"} 3', ("a", {"x": "1,2", "y": "}"}, 3.0)),
    (r'a{path="C:\\dir",q="say \"hi\"",n="l1\nl2"} 1', ("a", {"path": "C:\\dir", "q": 'say "hi"', "n": "l1\nl2"}, 1.0)),
    ('a{x="1",} 2', ("a", {"x": "1"}, 2.0)),  # trailing comma is legal
    ("a { x = \"1\" } 2", ("a", {"x": "1"}, 2.0)),
    ("vllm:x_total 7 1712345678000", ("vllm:x_total", {}, 7.0)),  # timestamp ignored
    ("a +Inf", ("a", {}, math.inf)),
    ("a -Inf", ("a", {}, -math.inf)),
    ("a 1.5e+03", ("a", {}, 1500.0)),
])
def test_sample_lines(line, expected):
    assert parse_sample(line) == expected


def test_nan_value():
    name, _, value = parse_sample("a NaN")
    assert name == "a" and math.isnan(value)


@pytest.mark.parametrize("line", ['a{x="1" y="2"} 3', 'a{x="1"', "a", "a{x=1} 2", "1abc 2", "a notanumber"])
def test_malformed_lines_are_skipped_not_fatal(line):
    assert parse_sample(line) is None
    assert parse(f"good 1\n{line}\nalso_good 2\n").samples.keys() == {"good", "also_good"}


def test_comments_and_blank_lines():
    expo = parse("# HELP a the help\n# TYPE a counter\n\n# some comment\na_total 3\n")
    assert expo.types == {"a": "counter"} and expo.get("a_total") == [({}, 3.0)]


def test_keep_parses_only_the_named_samples():
    expo = parse("# TYPE a gauge\na 1\nb{x=\"1\"} 2\nc 3\n", keep=frozenset({"a", "c"}))
    assert expo.samples == {"a": [({}, 1.0)], "c": [({}, 3.0)]} and expo.types == {"a": "gauge"}
