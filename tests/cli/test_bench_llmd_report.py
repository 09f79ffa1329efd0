"""``servelab bench --llm-d-report`` against the mock: a report per load point, valid against the
vendored llm-d schema, read back by compare with the run's own figures."""

import json

import jsonschema

from servelab.cli.main import main
from servelab.results.foreign import llmd, read_file


def test_bench_writes_a_valid_report_beside_the_result(mock_server, qwen3_path, tmp_path, capsys):
    mock = mock_server(ttft_ms=5, itl_ms=2)
    rc = main(["bench", "--backend", "vllm", "--base-url", mock.url, "--model", "mock", "--tokenizer", qwen3_path,
               "--dataset-name", "random", "--random-input-len", "16", "--random-output-len", "8", "--disable-tqdm",
               "--num-prompts", "8", "--max-concurrency", "2", "--save-result", "--result-dir", str(tmp_path),
               "--result-filename", "r.json", "--llm-d-report", "--percentile-metrics", "ttft,tpot,itl,e2el"])
    assert rc == 0
    out = capsys.readouterr().out
    report = tmp_path / "r.llm-d-report.json"
    assert f"servelab: llm-d Benchmark Report v0.2.1 written to {report}" in out
    doc = json.loads(report.read_text())
    jsonschema.Draft202012Validator(json.loads(llmd.SCHEMA.read_text())).validate(doc)
    result = json.loads((tmp_path / "r.json").read_text())
    [back] = read_file(report)
    for key in ("completed", "output_throughput", "mean_ttft_ms", "p99_tpot_ms", "median_itl_ms", "mean_e2el_ms"):
        assert abs(back[key] - result[key]) <= 1e-9 * abs(result[key]), key
    assert (tmp_path / "r.records.jsonl").is_file()  # the per-request rows stay beside it


def test_a_sweep_writes_one_report_per_load_point_sharing_one_experiment_id(tmp_path, qwen3_path, mock_server):
    server = mock_server(ttft_ms=5, itl_ms=2)
    argv = ["sweep", "--results", str(tmp_path / "results"), "--over", "rate", "--loads", "50,100",
            "--base-url", f"http://127.0.0.1:{server.port}", "--model", "mock", "--tokenizer", qwen3_path,
            "--dataset-name", "random", "--random-input-len", "16", "--random-output-len", "8", "--num-prompts", "6",
            "--no-telemetry", "--no-plot", "--llm-d-report"]
    assert main(argv) == 0
    reports = sorted((tmp_path / "results").rglob("*.llm-d-report.json"))
    assert [p.parent.parent.name for p in reports] == ["r100", "r50"]
    validator = jsonschema.Draft202012Validator(json.loads(llmd.SCHEMA.read_text()))
    docs = [json.loads(p.read_text()) for p in reports]
    for doc in docs:
        validator.validate(doc)
    assert len({d["run"]["eid"] for d in docs}) == 1 and len({d["run"]["uid"] for d in docs}) == 2
    assert sorted(d["scenario"]["load"]["standardized"]["rate_qps"] for d in docs) == [50.0, 100.0]


def test_optimize_writes_a_valid_report_per_run_sharing_one_experiment_id(tmp_path, qwen3_path, monkeypatch):
    """optimize on the simulator's fast mode: every measured run (baseline, steps, operating point)
    writes its report, all under the optimize's one experiment id."""
    monkeypatch.chdir(tmp_path)
    argv = ["optimize", "--engine", "sim", "--simulate", "--results", "results", "--name", "opt",
            "--tokenizer", qwen3_path, "--dataset-name", "random", "--random-input-len", "64",
            "--random-output-len", "16", "--num-prompts", "16", "--max-concurrency", "8", "--budget-runs", "6",
            "--llm-d-report", "--", "--max-num-seqs", "2"]
    assert main(argv) == 0
    results = sorted((tmp_path / "results" / "opt").rglob("result.json"))
    reports = sorted((tmp_path / "results" / "opt").rglob("*.llm-d-report.json"))
    assert len(reports) == len(results) >= 6 and {p.parent for p in reports} == {p.parent for p in results}
    validator = jsonschema.Draft202012Validator(json.loads(llmd.SCHEMA.read_text()))
    docs = [json.loads(p.read_text()) for p in reports]
    for doc in docs:
        validator.validate(doc)
    assert {d["run"]["eid"] for d in docs} == {"opt"}
