"""A study with ``llm-d-report`` in a workload: a valid report per load point, one experiment id."""

import json
import sys

import jsonschema
from net_helpers import free_port

from servelab.results.foreign import llmd
from servelab.study import layout, runner
from servelab.study.file import load_study


def test_each_run_of_a_study_writes_a_valid_report_sharing_the_studys_id(tmp_path, qwen3_path):
    port = free_port()
    argv = [sys.executable, "-m", "servelab.cli.main", "mock", "--port", str(port), "--ttft-ms", "5", "--itl-ms", "1"]
    (tmp_path / "t.toml").write_text(
        f'[study]\nname = "t"\nrepeats = 2\nwarmup = 0\nresults = "{tmp_path / "results"}"\n'
        f'[engines.m]\nkind = "command"\ncommand = {json.dumps(argv)}\nport = {port}\n'
        f'ready_url = "http://127.0.0.1:{port}/health"\n'
        '[workloads.w]\nargs = ["--dataset-name", "random", "--random-input-len", "16", "--random-output-len", "8", '
        '"--num-prompts", "6", "--max-concurrency", "2", "--no-telemetry", "--llm-d-report"]\n'
        f'tokenizer = "{qwen3_path}"\n')
    study = load_study(tmp_path / "t.toml")
    assert runner.run_study(study).exit_code == 0
    reports = sorted(layout.study_dir(study).rglob("*.llm-d-report.json"))
    assert len(reports) == 2
    validator = jsonschema.Draft202012Validator(json.loads(llmd.SCHEMA.read_text()))
    docs = [json.loads(p.read_text()) for p in reports]
    for doc in docs:
        validator.validate(doc)
    assert {d["run"]["eid"] for d in docs} == {"t"} and len({d["run"]["uid"] for d in docs}) == 2
