"""A session workload (``--dataset-name weka`` / ``agentic``) wherever a workload goes: a study,
a sweep and ``optimize``, each on the simulated engine, each run's result holding its sessions
with the measured prefix-cache hit rate beside the trace's ideal."""

from __future__ import annotations

import glob
import json
from pathlib import Path

from servelab.cli.main import main
from servelab.study.session import MADE_AT_SEND

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "agentic_weka.jsonl"
SYNTHETIC = ["--dataset-name", "agentic", "--num-prompts", "3", "--agentic-shape", "tool_wait_s=0.01", "turns=2:3"]


def agentic_sections(folder: Path) -> list[dict]:
    found = sorted(glob.glob(str(folder / "**" / "result.json"), recursive=True))
    return [json.loads(Path(f).read_text())["servelab"]["agentic"] for f in found]


def test_a_study_runs_a_trace_on_the_sim_engine_and_its_measured_rate_is_the_ideal(tmp_path, qwen3_path):
    study = tmp_path / "study.toml"
    study.write_text(f"""[study]
name = "agentic"
repeats = 1
seed = 0

[engines.sim]
kind = "sim"
model = "sim"

[workloads.sessions]
dataset-name = "weka"
dataset-path = "{EXAMPLE}"
tokenizer = "{qwen3_path}"
telemetry-interval = 0.05
""")
    assert main(["study", "run", str(study), "--results", str(tmp_path / "results")]) == 0
    run = tmp_path / "results" / "agentic" / "sim" / "sessions" / "1"
    result = json.loads((run / "result.json").read_text())
    agentic = result["servelab"]["agentic"]
    assert result["completed"] == 8 and agentic["sessions"] == 2
    # the study reset the prefix cache before the run: the engine's counters are the calls' alone
    assert agentic["measured_prefix_cache"] == {"rate": 0.254, "hits": 320, "queries": 1260,
                                                "source": "engine metrics (prefix_cache_hits / queries)"}
    assert agentic["ideal_prefix_cache_hit_rate"] == 0.254 and agentic["ideal_at_block_size"] == 16
    prompts = json.loads(next(run.parent.parent.glob("**/*prompts*.json")).read_text())
    assert prompts[0] == {"prompt": MADE_AT_SEND, "prompt_len": 150, "output_len": 20}


def test_a_sweep_of_session_workloads_measures_each_load(tmp_path, qwen3_path):
    argv = ["sweep", "--results", str(tmp_path), "--loads", "1,4", *SYNTHETIC, "--tokenizer", qwen3_path,
            "--no-telemetry", "--no-plot", "--engine", "sim"]
    assert main(argv) == 0
    points = json.loads((tmp_path / "sweep" / "sweep.json").read_text())["points"]
    assert [p["load"] for p in points] == [1, 4] and all(p["errors"] == 0 for p in points)
    sections = agentic_sections(tmp_path / "sweep")
    assert len(sections) == 2 and all(s["sessions"] == 3 and not any(x["cut"] for x in s["per_session"])
                                      for s in sections)
    assert sections[0]["calls"] == sections[1]["calls"] == sum(x["sent"] for x in sections[0]["per_session"])


def test_optimize_simulates_a_session_workload_and_its_block_manager_finds_the_ideal(tmp_path, qwen3_path):
    argv = ["optimize", "--engine", "sim", "--simulate", *SYNTHETIC, "--max-concurrency", "4", "--budget-runs", "4",
            "--no-operating-point", "--results", str(tmp_path), "--name", "o", "--tokenizer", qwen3_path, "--json",
            "--", "--max-num-seqs", "2"]
    assert main(argv) == 0
    record = json.loads((tmp_path / "o" / "optimize.json").read_text())
    assert record["engine"]["simulated"] is True and record["budget"]["runs_used"] == 4
    sections = agentic_sections(tmp_path / "o")
    assert len(sections) == 4
    for s in sections:
        assert s["measured_prefix_cache"]["source"] == "the simulator's block manager"
        assert s["measured_prefix_cache_hit_rate"] == s["ideal_prefix_cache_hit_rate"] > 0  # the cache holds them all
