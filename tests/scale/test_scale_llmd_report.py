"""``--llm-d-report`` in a scale run: each replica's run writes its report beside its result."""

from __future__ import annotations

import json

import jsonschema

from servelab.flags.bench_serve import parse_bench_spec
from servelab.results.foreign import llmd
from servelab.scale.local import Job, run_together


def test_each_replica_writes_a_valid_report(tmp_path, mock_server):
    servers = [mock_server(ttft_ms=5, itl_ms=2) for _ in range(2)]
    def spec(i: int, port: int):  # as scale/run.py places a replica's run: saved in its folder
        flags = ["--base-url", f"http://127.0.0.1:{port}", "--model", "mock", "--dataset-name", "random",
                 "--random-input-len", "8", "--random-output-len", "8", "--num-prompts", "4", "--max-concurrency", "2",
                 "--no-telemetry", "--disable-tqdm", "--llm-d-report"]
        return parse_bench_spec(flags).into(tmp_path / f"r{i}", "result.json", f"replica-{i}", progress=False)

    jobs = [Job(i, spec(i, s.port), {}, tmp_path / f"r{i}") for i, s in enumerate(servers)]
    assert all(r.exit_code == 0 for r in run_together(jobs))
    reports = sorted(tmp_path.rglob("*.llm-d-report.json"))
    assert [p.parent.name for p in reports] == ["r0", "r1"]
    validator = jsonschema.Draft202012Validator(json.loads(llmd.SCHEMA.read_text()))
    for path in reports:
        validator.validate(json.loads(path.read_text()))
