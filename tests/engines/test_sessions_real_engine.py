"""Integration: the hand-written WEKA trace replayed on the REAL embedded engine: vLLM's own
prefix-cache counters beside the trace's ideal, worked out at the block size vLLM reports
(``vllm:cache_config_info``: 128 tokens on the CPU build, not the default 16).

At 128 the trace's reuse is two whole blocks: fix-bug's join and add-test's second call each
find their first 128 tokens (its shared blocks 1-2) — 256 of 1,260 prompt tokens, 20.3 %.
No ready check, no warm-up, and the prefix cache emptied first (dev mode), so vLLM's
counters over the run are the calls' alone.
"""

import dataclasses
import urllib.request
from pathlib import Path

from engine_marks import EMBEDDED_ENGINE

from servelab.engines import embedded_engine_spec, start_engine
from servelab.flags.bench_serve import parse_bench_spec
from servelab.measure.run import execute

pytestmark = EMBEDDED_ENGINE

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "agentic_weka.jsonl"


def test_the_trace_on_the_embedded_engine_finds_its_ideal_within_10_points(tmp_path, port, one_real_engine_at_a_time):
    spec = dataclasses.replace(embedded_engine_spec(port=port), env={"VLLM_SERVER_DEV_MODE": "1"})
    with start_engine(spec, tmp_path, progress=False) as engine:
        req = urllib.request.Request(f"{engine.base_url}/reset_prefix_cache", data=b"", method="POST")
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert resp.status == 200
        outcome = execute(parse_bench_spec([
            "--backend", "vllm", "--base-url", engine.base_url, "--model", engine.model, "--dataset-name", "weka",
            "--dataset-path", str(EXAMPLE), "--num-warmups", "0", "--ready-check-timeout-sec", "0",
            "--telemetry-interval", "0.1", "--disable-tqdm"]))
    assert outcome.exit_code == 0 and outcome.result["completed"] == 8
    agentic = outcome.result["servelab"]["agentic"]
    print(f"\nembedded engine: ideal {agentic['ideal_prefix_cache_hit_rate']:.3f} at block size "
          f"{agentic['ideal_at_block_size']} ({agentic['block_size_source']}), measured "
          f"{agentic['measured_prefix_cache']}")
    assert agentic["ideal_at_block_size"] == 128 and agentic["block_size_source"].startswith("engine metrics")
    assert agentic["ideal_prefix_cache_hit_rate"] == round(256 / 1260, 4)
    assert agentic["measured_prefix_cache"]["queries"] == 1260
    assert abs(agentic["measured_prefix_cache_hit_rate"] - agentic["ideal_prefix_cache_hit_rate"]) <= 0.10
