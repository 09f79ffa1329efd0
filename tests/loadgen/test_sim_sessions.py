"""``--simulate`` with agentic sessions (loadgen/sim_sessions.py): the simulated engine's block
manager sees the calls' own blocks, so its prefix-cache hit rate is checked against the
trace's ideal, worked out at the engine's block size (measure/session_cache.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.datasets.agentic import ideal_hits
from servelab.datasets.sessions import read_sessions
from servelab.config import DatasetSpec
from servelab.flags.bench_serve import parse_bench_spec
from servelab.loadgen.sessions import summary_line
from servelab.measure.run import execute

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "agentic_weka.jsonl"


def simulate(qwen3_path, trace: Path, *extra) -> dict:
    argv = ["--simulate", "--dataset-name", "weka", "--dataset-path", str(trace), "--tokenizer", qwen3_path,
            "--disable-tqdm", *extra]
    return execute(parse_bench_spec(argv)).result


@pytest.mark.parametrize("block_size", [16, 48])
def test_a_trace_smaller_than_the_cache_gets_exactly_its_ideal_at_the_engines_block_size(qwen3_path, block_size,
                                                                                        capsys):
    result = simulate(qwen3_path, EXAMPLE, "--sim-block-size", str(block_size))
    agentic = result["servelab"]["agentic"]
    hits, queries = ideal_hits(read_sessions(DatasetSpec(name="weka", path=str(EXAMPLE)))[0], block_size)
    # at 48 a cache block reaching past a call's shared 64-token blocks is its own: explore1's
    # call 2 keeps 48 of its block 1, each main agent's later call 96 of its blocks 1-2
    assert (hits, queries) == ((320, 1260) if block_size == 16 else (48 + 96 + 96, 1260))
    assert agentic["ideal_at_block_size"] == block_size
    assert agentic["block_size_source"] == "engine metrics (vllm:cache_config_info)"
    assert agentic["measured_prefix_cache"] == {"rate": round(hits / queries, 4), "hits": hits, "queries": queries,
                                                "source": "the simulator's block manager"}
    assert agentic["ideal_prefix_cache_hit_rate"] == agentic["measured_prefix_cache_hit_rate"] == round(
        hits / queries, 4)
    assert result["completed"] == 8 and [s["cut"] for s in agentic["per_session"]] == [False, False]
    line = [x for x in capsys.readouterr().out.splitlines() if x.startswith("servelab: agentic:")]
    rate = round(hits / queries, 4)  # as the section gives it
    assert line and line[0].endswith(f"ideal prefix-cache hit rate {rate:.1%} at block size {block_size}; "
                                     f"{rate:.1%} measured (the simulator's block manager)")


def long_contexts(path: Path) -> Path:
    """Three sessions, each a 256-token context reused 5 s later, after the other two were
    sent: a 24-block cache (384 tokens) cannot keep one while the others pass through it."""
    calls = [{"t": 0, "in": 256, "out": 1, "hash_ids": [1, 2, 3, 4]},
             {"t": 5, "in": 300, "out": 1, "hash_ids": [1, 2, 3, 4], "think_time": 5.0}]
    path.write_text("".join(json.dumps({"id": f"s{i}", "block_size": 64, "requests": calls}) + "\n"
                            for i in range(3)))
    return path


def test_a_trace_larger_than_the_cache_scores_below_its_ideal_and_a_big_cache_gets_it(qwen3_path, tmp_path):
    trace = long_contexts(tmp_path / "long.jsonl")
    small = simulate(qwen3_path, trace, "--sim-kv-cache-tokens", "384", "--max-concurrency", "1")["servelab"]
    big = simulate(qwen3_path, trace, "--max-concurrency", "1")["servelab"]
    ideal = 3 * 256 / (3 * 256 + 3 * 300)
    for run in (small, big):
        assert run["agentic"]["ideal_prefix_cache_hit_rate"] == round(ideal, 4)
    assert big["agentic"]["measured_prefix_cache"]["hits"] == 3 * 256
    assert small["agentic"]["measured_prefix_cache"]["hits"] < 3 * 256
    assert small["agentic"]["measured_prefix_cache_hit_rate"] < ideal
    assert small["simulated"]["limits"]["kv_tokens"] == 384


def test_a_call_too_long_for_the_cache_cuts_its_session_and_its_dependants_are_never_sent(qwen3_path, tmp_path):
    trace = long_contexts(tmp_path / "long.jsonl")
    out = simulate(qwen3_path, trace, "--sim-kv-cache-tokens", "256")  # 256 + 1 tokens fit in no call
    agentic = out["servelab"]["agentic"]
    assert [(s["sent"], s["failed"], s["abandoned"], s["cut"]) for s in agentic["per_session"]] == [(1, 1, 1, True)] * 3
    assert out["completed"] == 0 and out["failed"] == 3


def test_sessions_on_the_simulator_keep_their_dag_and_waits_on_its_clock(qwen3_path, tmp_path):
    """Each call's intended send is its last parent's end plus its wait, on the virtual clock."""
    import numpy as np

    from servelab.datasets.agentic import Blocks, bundle, describe
    from servelab.datasets.agentic_synth import Shape, synthesize
    from servelab.loadgen.sim_sessions import run_simulated_sessions
    from servelab.measure.target import bench_config
    from servelab.config import BenchSpec, LoadSpec
    from servelab.metrics.tally import Tally
    from servelab.results.store import RecordSink
    from servelab.sim.model import EngineLimits, StepModel

    sessions = synthesize(5, Shape(fan_out_p=0.6), np.random.default_rng(3))
    assert any(c.agent for s in sessions for c in s.calls)
    work = bundle(sessions, "r-", describe(sessions), Blocks(list(range(1000, 3000))))
    spec = BenchSpec(load=LoadSpec(max_concurrency=3), dataset=DatasetSpec(name="agentic"))
    sink = RecordSink(Tally(work.requests))
    run, sim, records, agentic = run_simulated_sessions(bench_config(spec, "sim"), work, EngineLimits(), StepModel(),
                                                        sink)
    by = {(r.conversation_id, r.turn): r for r in records}
    assert len(by) == len(work.requests) and all(r.error is None for r in records)
    for s in sessions:
        for k, call in enumerate(s.calls):
            me = by[s.session_id, k]
            if call.parents:
                assert me.intended_ns == max(by[s.session_id, p].done_ns for p in call.parents) + round(
                    call.wait_s * 1e9)
            assert me.sent_ns >= me.intended_ns
    spans = sorted((r.sent_ns, 1) for r in records) + sorted((r.done_ns, -1) for r in records)
    in_flight = np.cumsum([d for _, d in sorted(spans)])
    assert in_flight.max() <= 3  # the cap holds calls in flight


def test_the_diagnosis_names_the_eviction_with_its_evidence_when_the_trace_outgrows_the_cache(qwen3_path, tmp_path):
    trace = long_contexts(tmp_path / "long.jsonl")
    small = execute(parse_bench_spec(["--simulate", "--dataset-name", "weka", "--dataset-path", str(trace),
                                      "--tokenizer", qwen3_path, "--disable-tqdm", "--sim-kv-cache-tokens", "384",
                                      "--max-concurrency", "1"])).result
    found = {v["id"]: v for v in small["servelab"]["diagnosis"]["verdicts"]}
    v = found["prefix-cache-eviction"]
    # 3 × 300 + 3 × 256 prompt tokens, 46 % reusable: 900 computed + 6 output tokens in a 384-token cache
    assert v["evidence"]["footprint_tokens"] == 906 and v["evidence"]["kv_cache_tokens"] == 384
    assert v["evidence"]["measured_hit_rate"] == small["servelab"]["agentic"]["measured_prefix_cache_hit_rate"]
    assert v["evidence"]["hit_tokens_lost"] > 0
    big = execute(parse_bench_spec(["--simulate", "--dataset-name", "weka", "--dataset-path", str(trace),
                                    "--tokenizer", qwen3_path, "--disable-tqdm", "--max-concurrency", "1"])).result
    assert "prefix-cache-eviction" not in {v["id"] for v in big["servelab"]["diagnosis"]["verdicts"]}


def test_one_lane_replays_the_sessions_one_after_another_on_the_simulators_clock(qwen3_path, tmp_path):
    """--max-sessions 1: the run lasts at least the sum of the sessions' makespans (none overlaps);
    without it they overlap, and the run is shorter than that sum."""
    trace = long_contexts(tmp_path / "long.jsonl")

    def run(*extra):
        result = simulate(qwen3_path, trace, "--sim-kv-cache-tokens", "65536", *extra)
        spans = [s["makespan_s"] for s in result["servelab"]["agentic"]["per_session"]]
        return result["duration"], spans

    duration, spans = run("--max-sessions", "1")
    assert len(spans) == 3 and min(spans) >= 5.0 and duration >= sum(spans)
    lanes = simulate(qwen3_path, trace, "--max-sessions", "1")["servelab"]["agentic"]
    assert lanes["max_sessions"] == 1
    assert summary_line(lanes).startswith("servelab: agentic: 3 sessions in 1 lane, 6 calls,")
    together, spans = run()
    assert together < sum(spans) and together < duration
