"""The Prometheus text parser, on real ``/metrics`` captures and on the format's corners."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from servelab.errors import ServerError
from servelab.telemetry.prometheus import parse

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


def one(line: str) -> tuple[str, dict, float]:
    """The single sample a one-line page holds."""
    [(name, [(labels, value)])] = parse(line).samples.items()
    return name, labels, value


@pytest.mark.parametrize("line, expected", [
    ('a{x="1,2",y="}"} 3', ("a", {"x": "1,2", "y": "}"}, 3.0)),
    ('a{x="1",} 2', ("a", {"x": "1"}, 2.0)),  # trailing comma is legal
    ("a { x = \"1\" } 2", ("a", {"x": "1"}, 2.0)),
    ("vllm:x_total 7 1712345678000", ("vllm:x_total", {}, 7.0)),  # timestamp ignored
    ("a +Inf", ("a", {}, math.inf)),
    ("a -Inf", ("a", {}, -math.inf)),
    ("a 1.5e+03", ("a", {}, 1500.0)),
])
def test_sample_lines(line, expected):
    assert one(line) == expected


@pytest.mark.parametrize("value, label", [
    (r'say \"hi\"', 'say "hi"'),
    (r"C:\\dir", "C:\\dir"),
    (r"l1\nl2", "l1\nl2"),
    (r'\\\"}', '\\"}'),  # an escaped backslash, then an escaped quote, then a brace
    (r"x\\", "x\\"),  # a value that ends in a backslash
    (r'\\n', "\\n"),  # a backslash then "n", not a newline
])
def test_label_escapes(value, label):
    assert one(f'a{{v="{value}",w="after"}} 1')[1] == {"v": label, "w": "after"}


def test_values_are_floats():
    assert isinstance(one("a 3")[2], float)


def test_nan_value():
    name, _, value = one("a NaN")
    assert name == "a" and math.isnan(value)


def test_a_counter_is_read_under_its_total_name_and_created_is_its_own_series():
    """prometheus_client exposes a counter ``c`` as ``c_total`` plus a ``c_created``
    gauge (a Unix time): the value is ``_total``'s, never ``_created``'s."""
    page = ("# TYPE c_total counter\nc_total{finished_reason=\"stop\"} 4\n"
            "# TYPE c_created gauge\nc_created{finished_reason=\"stop\"} 1.7959815e+09\n")
    expo = parse(page)
    assert expo.get("c_total") == [({"finished_reason": "stop"}, 4.0)]
    assert expo.get("c_created") == [({"finished_reason": "stop"}, 1.7959815e09)]
    assert expo.types == {"c_total": "counter", "c_created": "gauge"}


def test_a_counter_typed_without_total_is_exposed_with_it():
    """Text 0.0.4 lets a counter's sample lack ``_total``; the names table holds
    exposed ``_total`` names, so the parser gives it that name."""
    expo = parse("# TYPE vllm:num_preemptions counter\nvllm:num_preemptions 2\n")
    assert expo.samples == {"vllm:num_preemptions_total": [({}, 2.0)]}
    assert expo.types == {"vllm:num_preemptions_total": "counter"}


@pytest.mark.parametrize("line", ['a{x="1" y="2"} 3', 'a{x="1"', "a", "a{x=1} 2", "1abc 2", "a notanumber",
                                  'a{x="1",x="2"} 3', "# TYPE a"])
def test_a_malformed_line_is_one_error_naming_it(line):
    with pytest.raises(ServerError) as caught:
        parse(f"good 1\n{line}\nalso_good 2\n")
    assert str(caught.value) == f"malformed /metrics line {line!r}"


def test_a_malformed_line_outside_keep_is_never_read():
    expo = parse('good 1\nbad{x=1} 2\n', keep=frozenset({"good"}))
    assert expo.samples == {"good": [({}, 1.0)]}


def test_comments_and_blank_lines():
    expo = parse("# HELP a_total the help\n# TYPE a_total counter\n\n# some comment\na_total 3\n")
    assert expo.types == {"a_total": "counter"} and expo.get("a_total") == [({}, 3.0)]


def test_keep_parses_only_the_named_samples():
    expo = parse("# TYPE a gauge\na 1\nb{x=\"1\"} 2\nc 3\n", keep=frozenset({"a", "c"}))
    assert expo.samples == {"a": [({}, 1.0)], "c": [({}, 3.0)]} and expo.types == {"a": "gauge"}
