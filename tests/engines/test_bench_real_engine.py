"""Integration: `servelab bench` against the REAL embedded engine, then a clean stop.

One vLLM start (~30 s). The memory report must be parsed, every request must
succeed with exactly the tokens asked (random dataset → ignore_eos), and after
the stop no process of the engine's group may be left and the port must be free.
"""

import fcntl
import json
from pathlib import Path

import pytest
from engine_helpers import group_pids
from net_helpers import port_open

from servelab.engines import embedded_engine_spec, start_engine
from servelab.flags.bench import parse_bench_argv
from servelab.study.bench import execute

pytestmark = pytest.mark.engine


def test_bench_on_the_embedded_engine_then_nothing_left(tmp_path, port):
    with open(Path("/tmp/servelab-engine.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with start_engine(embedded_engine_spec(port=port), tmp_path, progress=False) as engine:
            pgid = engine.pid
            assert engine.memory_report.kv_cache_tokens > 0 and engine.memory_report.max_concurrency > 0
            args = parse_bench_argv([
                "--backend", "vllm", "--base-url", engine.base_url, "--model", engine.model,
                "--dataset-name", "random", "--random-input-len", "32", "--random-output-len", "16",
                "--num-prompts", "8", "--max-concurrency", "4", "--disable-tqdm", "--save-result",
                "--result-dir", str(tmp_path), "--result-filename", "r.json"])
            outcome = execute(args)
    assert outcome.exit_code == 0
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["completed"] == 8 and result["failed"] == 0
    assert result["total_output_tokens"] == 8 * 16 and result["total_input_tokens"] == 8 * 32
    assert result["mean_ttft_ms"] > 0 and result["mean_tpot_ms"] > 0
    assert result["servelab"]["provenance"]["server_models"]["data"][0]["id"] == engine.model
    assert group_pids(pgid) == []
    assert not port_open(port)
