"""Other tools' results read by their markers, each metric by its meaning, checked against the
mock's own truth (fixtures/README.md says where each file came from)."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from servelab.errors import InputError
from servelab.results.foreign import read_file
from servelab.results.foreign.shape import foreign_of
from servelab.results.runs import load_runs

FIX = Path(__file__).parent / "fixtures"
NS = 1e9


@pytest.fixture(scope="module")
def truth():
    """What the mock sent during the AIPerf run (the GuideLLM/SGLang fixtures derive from it too)."""
    reqs = [r for r in json.loads((FIX / "aiperf_mock.truth.json").read_text())["requests"] if r["finish"] == "ok"]
    first = np.array([r["event_ns"][0] for r in reqs]) / NS
    last = np.array([r["event_ns"][-1] for r in reqs]) / NS
    start = np.array([r["wire_ns"] for r in reqs]) / NS
    out = np.array([r["output_tokens"] for r in reqs])
    return {"n": len(reqs), "output_tokens": int(out.sum()),
            "tpot_ms": float(np.mean(1000 * (last - first) / (out - 1))),
            "tpot_incl_first_ms": float(np.mean(1000 * (last - start) / out)),
            "ttft_ms": float(np.mean(1000 * (first - start))),
            "e2el_ms": float(np.mean([1000 * (r["end_ns"] / NS - s) for r, s in zip(reqs, start)]))}


def test_aiperf_folder_real_output_gets_servelabs_own_statistics_from_its_records(truth):
    [run] = load_runs([FIX / "aiperf_mock"])  # inputs.json beside them is passed over
    r, f = run.result, foreign_of(run.result)
    assert (f["tool"], f["version"]) == ("aiperf", "0.13.0")
    assert run.path.name == "profile_export_aiperf.json" and "profile_export.jsonl" in f["format"]
    assert r["completed"] == truth["n"] == 40 and r["total_output_tokens"] == truth["output_tokens"]
    # the client's TPOT spans the same events the mock wrote: within 0.2 ms of the server's
    assert r["mean_tpot_ms"] == pytest.approx(truth["tpot_ms"], abs=0.2)
    # the client's TTFT includes the wire and its own parsing: never less than the server's, a few ms more
    assert truth["ttft_ms"] <= r["mean_ttft_ms"] <= truth["ttft_ms"] + 5
    assert "mean_itl_ms" in r and r["max_concurrency"] == 4 and r["model_id"] == "mock"
    assert run.servelab["steady_state"]["plateau"] is True
    assert not any("steady" in x for x in f["not_computable"])


def test_aiperf_summary_alone_maps_its_itl_to_tpot_and_says_what_it_cannot_give():
    [r] = read_file(FIX / "aiperf_mock" / "profile_export_aiperf.json")
    doc = json.loads((FIX / "aiperf_mock" / "profile_export_aiperf.json").read_text())
    assert r["mean_tpot_ms"] == doc["inter_token_latency"]["avg"]  # AIPerf's ITL is vLLM's TPOT
    assert r["duration"] == doc["benchmark_duration"]["avg"]  # "sec"
    assert "mean_itl_ms" not in r
    assert any(x.startswith("steady state") for x in foreign_of(r)["not_computable"])


def test_guidellm_v2_by_meaning_and_units(truth):
    [r] = read_file(FIX / "guidellm_v2.json")
    f = foreign_of(r)
    assert f["tool"] == "guidellm" and f["sampled"] == "sampled 10 of 40 requests"
    assert r["mean_tpot_ms"] == pytest.approx(truth["tpot_ms"])  # its inter_token_latency_ms
    assert r["mean_tpot_incl_first_ms"] == pytest.approx(truth["tpot_incl_first_ms"])  # its time_per_output_token_ms
    assert r["mean_e2el_ms"] == pytest.approx(truth["e2el_ms"])  # request_latency is seconds
    assert r["mean_ttft_ms"] == pytest.approx(truth["ttft_ms"])
    assert r["completed"] == 40 and r["total_output_tokens"] == truth["output_tokens"]
    assert "mean_itl_ms" not in r and r["max_concurrency"] == 4


def test_an_unknown_version_of_a_known_format_is_read_and_said_once(tmp_path):
    doc = json.loads((FIX / "guidellm_v2.json").read_text())
    doc["metadata"]["version"] = 3
    (tmp_path / "g.json").write_text(json.dumps(doc))
    [r] = read_file(tmp_path / "g.json")
    assert foreign_of(r)["notes"] == ["GuideLLM report version 3: read as version 2"]
    assert r["mean_tpot_ms"] > 0
    old = {"args": {}, "benchmarks": doc["benchmarks"]}  # before metadata: version 1
    (tmp_path / "old.json").write_text(json.dumps(old))
    [r1] = read_file(tmp_path / "old.json")
    assert foreign_of(r1)["format"] == "GuideLLM benchmarks.json v1" and not foreign_of(r1)["notes"]


def test_inference_perf_lifecycle_seconds_and_its_own_itl():
    [r] = read_file(FIX / "inference_perf_stage_0_lifecycle_metrics.json")
    lat = json.loads((FIX / "inference_perf_stage_0_lifecycle_metrics.json").read_text())["successes"]["latency"]
    assert r["mean_ttft_ms"] == pytest.approx(1000 * lat["time_to_first_token"]["mean"])
    assert r["mean_tpot_ms"] == pytest.approx(1000 * lat["time_per_output_token"]["mean"])
    assert r["mean_tpot_incl_first_ms"] == pytest.approx(1000 * lat["normalized_time_per_output_token"]["mean"])
    assert r["p99_itl_tool_ms"] == pytest.approx(1000 * lat["inter_token_latency"]["p99"])
    assert "mean_itl_ms" not in r and r["completed"] == 60
    assert foreign_of(r)["version"] == "not recorded"


def test_sglang_jsonl(truth):
    [r] = read_file(FIX / "sglang.jsonl")
    assert foreign_of(r)["tool"] == "sglang bench_serving"
    assert r["mean_tpot_ms"] == pytest.approx(truth["tpot_ms"])
    assert r["mean_e2el_ms"] > r["mean_ttft_ms"] and r["total_token_throughput"] > r["output_throughput"]


def test_llmd_report_yaml_published_example():
    [r] = read_file(FIX / "llmd_br_v0_2_1_example.yaml")
    f = foreign_of(r)
    assert (f["tool"], f["version"]) == ("inference-perf", "0.3.0")
    assert r["mean_ttft_ms"] == pytest.approx(36.8578234128654)  # units: s
    assert r["p99_ttft_ms"] == pytest.approx(50.29489721637218)
    assert "mean_itl_ms" not in r and r["mean_itl_tool_ms"] == pytest.approx(36.8578234128654)
    assert r["completed"] == 500 and r["duration"] == pytest.approx(49.97206788184121)


def test_vllm_save_result_is_marked_by_its_markers(tmp_path):
    doc = {"date": "20261205-101500", "endpoint_type": "vllm", "backend": "vllm", "label": None,
           "model_id": "m", "tokenizer_id": "m", "num_prompts": 4, "request_rate": "inf", "burstiness": 1.0,
           "max_concurrency": 2, "duration": 1.0, "completed": 4, "failed": 0, "output_throughput": 10.0,
           "mean_ttft_ms": 5.0}
    (tmp_path / "whatever.txt").write_text("\n".join([json.dumps(doc)] * 2))  # --append-result, any name
    runs = load_runs([tmp_path / "whatever.txt"])
    assert [foreign_of(run.result)["tool"] for run in runs] == ["vllm bench serve"] * 2
    assert [run.repeat for run in runs] == [1, 2] and runs[0].result["mean_ttft_ms"] == 5.0


def test_an_unknown_file_is_one_line_naming_what_was_expected(tmp_path):
    (tmp_path / "x.json").write_text(json.dumps({"hello": 1}))
    with pytest.raises(InputError) as err:
        load_runs([tmp_path / "x.json"])
    assert "\n" not in str(err.value) and "GuideLLM benchmarks.json" in str(err.value)
    assert str(err.value).startswith(f"{tmp_path / 'x.json'}: not a result file servelab knows; expected ")


def test_a_folder_of_foreign_repeats_is_one_config(tmp_path):
    for i in range(3):
        shutil.copy(FIX / "guidellm_v2.json", tmp_path / f"run{i}.json")
    runs = load_runs([tmp_path])
    assert [r.config for r in runs] == [tmp_path.name] * 3


def test_aiperf_prompt_tokens_are_the_servers_count_as_vllms_client_takes_them(truth):
    [run] = load_runs([FIX / "aiperf_mock"])
    truth_prompts = sum(r["prompt_tokens"] for r in json.loads((FIX / "aiperf_mock.truth.json").read_text())["requests"])
    assert run.result["total_input_tokens"] == truth_prompts  # not AIPerf's own tokenizer's 64 a request
    [summary] = read_file(FIX / "aiperf_mock" / "profile_export_aiperf.json")
    assert summary["total_input_tokens"] == truth_prompts


def test_aiperf_records_alone_are_read(tmp_path):
    shutil.copy(FIX / "aiperf_mock" / "profile_export.jsonl", tmp_path / "anything.jsonl")
    [r] = read_file(tmp_path / "anything.jsonl")
    assert foreign_of(r)["format"] == "AIPerf profile_export.jsonl" and r["completed"] == 40
    assert "steady_state" not in r["servelab"]  # no load in the records: said, not guessed
    assert foreign_of(r)["not_computable"][0].startswith("steady state (the load")


def test_inference_perf_per_request_file_gets_servelabs_own_statistics(truth):
    [r] = read_file(FIX / "inference_perf_per_request_lifecycle_metrics.json")
    assert r["completed"] == truth["n"] and r["total_output_tokens"] == truth["output_tokens"]
    assert r["mean_tpot_ms"] == pytest.approx(truth["tpot_ms"]) and r["mean_ttft_ms"] == pytest.approx(truth["ttft_ms"])
    assert "mean_itl_ms" not in r and "mean_itl_tool_ms" in r  # per-token times: not vLLM's per-event ITL
    assert foreign_of(r)["not_computable"][0].startswith("ITL")


def test_version_drift_in_aiperf_and_the_llmd_report_is_said(tmp_path):
    doc = json.loads((FIX / "aiperf_mock" / "profile_export_aiperf.json").read_text())
    doc["schema_version"] = "2.0"
    (tmp_path / "a.json").write_text(json.dumps(doc))
    [r] = read_file(tmp_path / "a.json")
    assert foreign_of(r)["notes"] == ["AIPerf schema version 2.0: read as version 1.5"] and r["mean_tpot_ms"] > 0
    text = (FIX / "llmd_br_v0_2_1_example.yaml").read_text().replace("version: 0.2.1", "version: 0.2.7")
    (tmp_path / "b.yaml").write_text(text)
    [r] = read_file(tmp_path / "b.yaml")
    assert foreign_of(r)["notes"] == ["llm-d Benchmark Report version 0.2.7: read as version 0.2.1"]


def test_a_yaml_guidellm_report_reads_as_its_json(tmp_path):
    import yaml

    doc = json.loads((FIX / "guidellm_v2.json").read_text())
    (tmp_path / "benchmarks.yaml").write_text(yaml.safe_dump(doc))
    [a], [b] = read_file(tmp_path / "benchmarks.yaml"), read_file(FIX / "guidellm_v2.json")
    assert a == b


def test_guidellm_0_8_1_real_output_against_the_mocks_truth():
    """GuideLLM 0.8.1's own benchmarks.json (fixtures/README.md), each mapped metric against what the mock sent."""
    reqs = json.loads((FIX / "guidellm_mock.truth.json").read_text())["requests"]
    [r] = read_file(FIX / "guidellm_mock" / "benchmarks.json")
    f = foreign_of(r)
    assert (f["tool"], f["version"], f["sampled"]) == ("guidellm", "0.8.1", None)
    assert r["completed"] == len(reqs) == 40 and r["max_concurrency"] == 4 and r["model_id"] == "mock"
    assert r["total_output_tokens"] == sum(x["output_tokens"] for x in reqs)
    assert r["total_input_tokens"] == sum(x["prompt_tokens"] for x in reqs)  # the server's usage count
    tpot = np.mean([(x["event_ns"][-1] - x["event_ns"][0]) / 1e6 / (x["output_tokens"] - 1) for x in reqs])
    ttft = np.mean([(x["event_ns"][0] - x["wire_ns"]) / 1e6 for x in reqs])
    e2el = np.mean([(x["end_ns"] - x["wire_ns"]) / 1e6 for x in reqs])
    assert r["mean_tpot_ms"] == pytest.approx(tpot, abs=0.2)  # its inter_token_latency_ms
    assert ttft <= r["mean_ttft_ms"] <= ttft + 5 and e2el <= r["mean_e2el_ms"] <= e2el + 5  # seconds → ms
    incl = np.mean([(x["event_ns"][-1] - x["wire_ns"]) / 1e6 / x["output_tokens"] for x in reqs])
    assert incl <= r["mean_tpot_incl_first_ms"] <= incl + 0.5  # its time_per_output_token_ms: (last − start) ÷ n
    assert any(x.startswith("steady state (its per-request rows") for x in f["not_computable"])


def test_inference_perf_0_7_0_real_folder_is_one_run_from_its_per_request_file():
    """inference-perf 0.7.0's own report folder (fixtures/README.md) against the mock's truth."""
    reqs = json.loads((FIX / "inference_perf_mock.truth.json").read_text())["requests"]
    [run] = load_runs([FIX / "inference_perf_mock"])  # config.yaml beside it is passed over
    r, f = run.result, foreign_of(run.result)
    assert f["format"] == "inference-perf per_request_lifecycle_metrics.json"
    assert "views of the same run, not repeats" in f["notes"][0] and "summary_lifecycle_metrics.json" in f["notes"][0]
    assert r["completed"] == len(reqs) == 40
    assert r["total_input_tokens"] == sum(x["prompt_tokens"] for x in reqs)
    assert r["total_output_tokens"] == sum(x["output_tokens"] for x in reqs)
    tpot = np.mean([(x["event_ns"][-1] - x["event_ns"][0]) / 1e6 / (x["output_tokens"] - 1) for x in reqs])
    ttft = np.mean([(x["event_ns"][0] - x["wire_ns"]) / 1e6 for x in reqs])
    assert r["mean_tpot_ms"] == pytest.approx(tpot, abs=0.2) and ttft <= r["mean_ttft_ms"] <= ttft + 5
    assert "mean_itl_ms" not in r and "mean_itl_tool_ms" in r


def test_inference_perf_summary_and_its_own_llmd_report_agree_with_its_per_request_file():
    folder = FIX / "inference_perf_mock"
    [summary] = read_file(folder / "summary_lifecycle_metrics.json")
    [report] = read_file(folder / "inference-perf.partial.stage_0.yaml")
    [per_request] = read_file(folder / "per_request_lifecycle_metrics.json")
    assert foreign_of(report)["tool"] == "inference-perf"  # named by its run id
    for key in ("mean_ttft_ms", "mean_tpot_ms", "p99_ttft_ms", "output_throughput"):
        assert summary[key] == pytest.approx(per_request[key], rel=1e-6), key
        assert report[key] == pytest.approx(summary[key], rel=1e-6), key
    assert summary["mean_tpot_incl_first_ms"] == pytest.approx(report["mean_tpot_incl_first_ms"])


def test_inference_perfs_own_llmd_report_validates_against_the_vendored_schema():
    import jsonschema
    import yaml

    from servelab.results.foreign import llmd

    doc = yaml.safe_load((FIX / "inference_perf_mock" / "inference-perf.partial.stage_0.yaml").read_text())
    jsonschema.Draft202012Validator(json.loads(llmd.SCHEMA.read_text())).validate(doc)


def test_a_guidellm_sweep_is_one_config_per_load_point(tmp_path):
    doc = json.loads((FIX / "guidellm_mock" / "benchmarks.json").read_text())
    second = json.loads(json.dumps(doc["benchmarks"][0]))
    second["config"]["strategy"]["streams"] = 8
    doc["benchmarks"].append(second)
    (tmp_path / "sweep.json").write_text(json.dumps(doc))
    runs = load_runs([tmp_path / "sweep.json"])
    assert [(r.config, r.result["max_concurrency"], r.repeat) for r in runs] == \
        [("sweep@concurrent4", 4, None), ("sweep@concurrent8", 8, None)]


def test_guidellm_complete_rows_give_servelabs_own_statistics_a_sample_does_not():
    doc = json.loads((FIX / "guidellm_mock" / "benchmarks.json").read_text())
    rows = doc["benchmarks"][0]["requests"]["successful"]
    [r] = read_file(FIX / "guidellm_mock" / "benchmarks.json")
    # vLLM's mean TPOT counts each request once; GuideLLM's distribution counts it once per token
    assert r["mean_tpot_ms"] == pytest.approx(np.mean([x["inter_token_latency_ms"] for x in rows]))
    assert r["p99_ttft_ms"] == pytest.approx(np.percentile([x["time_to_first_token_ms"] for x in rows], 99))
    assert r["mean_e2el_ms"] == pytest.approx(1000 * np.mean([x["request_latency"] for x in rows]))
    assert foreign_of(r)["notes"] == ["TTFT, TPOT and E2EL statistics computed by servelab from its 40 per-request rows"]
    [sampled] = read_file(FIX / "guidellm_v2.json")
    agg = json.loads((FIX / "guidellm_v2.json").read_text())["benchmarks"][0]["metrics"]
    assert sampled["mean_tpot_ms"] == agg["inter_token_latency_ms"]["successful"]["mean"]  # its own, from a sample
    assert not foreign_of(sampled)["notes"]


def test_vllm_save_detailed_lists_give_servelabs_own_statistics_and_steady_state():
    """vLLM 0.32.0+cpu's own --save-detailed result against the mock (fixtures/README.md)."""
    path = FIX / "vllm_detailed" / "vllm-detailed.json"
    doc = json.loads(path.read_text())
    [r] = read_file(path)
    for key in ("completed", "total_output_tokens", "mean_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_itl_ms",
                "p99_itl_ms", "max_output_tokens_per_s"):
        assert r[key] == pytest.approx(doc[key], rel=1e-9), key  # the same definitions, recomputed
    assert doc["max_concurrent_requests"] == 28 and r["max_concurrent_requests"] == 4  # vLLM's count overshoots its cap
    assert r["servelab"]["steady_state"]["plateau"] is True
    reqs = json.loads((FIX / "vllm_detailed.truth.json").read_text())["requests"]
    assert r["total_output_tokens"] == sum(x["output_tokens"] for x in reqs)
    tpot = np.mean([(x["event_ns"][-1] - x["event_ns"][0]) / 1e6 / (x["output_tokens"] - 1) for x in reqs])
    assert r["mean_tpot_ms"] == pytest.approx(tpot, abs=0.2)


def test_sglang_0_5_23_real_output_against_the_mocks_truth():
    """SGLang 0.5.23's own bench_serving JSONL (fixtures/README.md)."""
    reqs = sorted(json.loads((FIX / "sglang_mock.truth.json").read_text())["requests"], key=lambda x: x["recv_ns"])
    reqs = reqs[1:]  # bench_serving sends one warm-up request first, outside its figures
    [r] = read_file(FIX / "sglang_mock" / "sglang.jsonl")
    assert foreign_of(r)["tool"] == "sglang bench_serving" and r["request_rate"] == "inf"
    assert r["completed"] == len(reqs) == 40 and r["total_output_tokens"] == sum(x["output_tokens"] for x in reqs)
    tpot = np.mean([(x["event_ns"][-1] - x["event_ns"][0]) / 1e6 / (x["output_tokens"] - 1) for x in reqs])
    gaps = [(b - a) / 1e6 for x in reqs for a, b in zip(x["event_ns"], x["event_ns"][1:])]
    e2el = np.mean([(x["event_ns"][-1] - x["wire_ns"]) / 1e6 for x in reqs])
    assert r["mean_tpot_ms"] == pytest.approx(tpot, abs=0.2) and r["mean_itl_ms"] == pytest.approx(np.mean(gaps), abs=0.2)
    assert e2el <= r["mean_e2el_ms"] <= e2el + 5  # its *_e2e_latency_ms
