"""The llm-d Benchmark Report servelab writes: valid against the published schema (vendored),
and read back with every shared metric kept."""

import json
from pathlib import Path

import jsonschema
import pytest

from servelab.results.foreign import llmd, read_file
from servelab.results.foreign.shape import foreign_of

FIX = Path(__file__).parent / "fixtures"
SCHEMA = json.loads(llmd.SCHEMA.read_text())
RUNS = sorted((FIX / "same_requests").glob("*/servelab-*.json"))


def validate(doc: dict) -> None:
    jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker()).validate(doc)


def rich_result() -> dict:
    """Every figure the writer maps: all four latencies, odd percentiles (p99.9), a rate."""
    r = json.loads(RUNS[0].read_text())
    for name in ("ttft", "tpot", "itl", "e2el"):
        r.update({f"mean_{name}_ms": 10.0, f"median_{name}_ms": 9.0, f"std_{name}_ms": 1.5,
                  f"p90_{name}_ms": 12.0, f"p99_{name}_ms": 14.0, f"p99.9_{name}_ms": 15.0})
    r["request_rate"] = 5.0
    return r


def test_the_vendored_schema_is_the_published_one():
    assert SCHEMA["title"] == "Benchmark Report v0.2.1" and SCHEMA["required"] == ["run", "results"]
    assert SCHEMA["additionalProperties"] is False


@pytest.mark.parametrize("make", [lambda: json.loads(RUNS[0].read_text()), rich_result], ids=["measured", "rich"])
def test_every_report_servelab_writes_validates(make, tmp_path):
    path = llmd.write(make(), tmp_path / "r.llm-d-report.json", eid="study-1")
    doc = json.loads(path.read_text())
    validate(doc)
    assert doc["version"] == "0.2.1" and doc["run"]["eid"] == "study-1"
    assert doc["scenario"]["load"]["standardized"]["tool"] == "servelab"
    assert "servelab" in doc["scenario"]["load"]["native"]["config"]  # extras where the schema allows them


def test_a_report_missing_a_required_key_fails_the_schema():
    doc = llmd.report_of(json.loads(RUNS[0].read_text()), "u")
    del doc["run"]
    with pytest.raises(jsonschema.ValidationError):
        validate(doc)
    doc = llmd.report_of(json.loads(RUNS[0].read_text()), "u")
    doc["extra"] = 1  # no extra keys: tool data goes in the places the schema gives it
    with pytest.raises(jsonschema.ValidationError):
        validate(doc)


SHARED = ("completed", "failed", "duration", "output_throughput", "total_token_throughput", "request_throughput",
          "total_input_tokens", "total_output_tokens", "max_concurrency")


@pytest.mark.parametrize("make", [lambda: json.loads(RUNS[0].read_text()), rich_result], ids=["measured", "rich"])
def test_round_trip_keeps_every_shared_metric(make, tmp_path):
    result = make()
    [back] = read_file(llmd.write(result, tmp_path / "r.json"))
    assert foreign_of(back)["tool"] == "servelab" and foreign_of(back)["format"] == "llm-d Benchmark Report v0.2.1"
    for key in SHARED:
        assert back[key] == pytest.approx(result[key], rel=1e-9), key
    latency = [k for k in result if k.endswith("_ms") and k.split("_")[0] in ("mean", "median", "std", "p90", "p99")
               and k.split("_", 1)[1][:-3] in ("ttft", "tpot", "itl", "e2el")]
    assert latency and all(back[k] == pytest.approx(result[k], rel=1e-9) for k in latency)
    assert back["servelab"]["steady_state"] == result["servelab"]["steady_state"]  # extras come back too


def test_report_path_is_beside_the_result_one_per_appended_run():
    assert llmd.report_path(Path("d/r.json"), "20261205-101500", False) == Path("d/r.llm-d-report.json")
    assert llmd.report_path(Path("d/r.json"), "20261205-101500", True) == Path("d/r.20261205-101500.llm-d-report.json")
