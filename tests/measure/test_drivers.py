"""The Driver seam's contract (measure/drivers.py), for every driver in ``DRIVERS``: run on
the mock (or the simulator, which needs no server), the sink sees every request exactly
once, the run has a t0 and an end, and a driver that runs in this process starts at a
shared t0 when its t0 hook gives one (scale's replicas do), multi-turn included. And the
rest of measure/ reads a run's mode from its driver's kind, never from the spec."""

from __future__ import annotations

import ast
import json
import time
from pathlib import Path

import pytest

from servelab.config import BenchSpec, DatasetSpec, LoadSpec, MultiTurnSpec, OutputSpec, ServerSpec
from servelab.loadgen.hooks import Hooks
from servelab.measure.drivers import DRIVERS, Bench
from servelab.measure.run import _prepare
from servelab.measure.target import bench_config
from servelab.metrics.tally import Tally
from servelab.results.store import RecordSink
from servelab.sim.model import EngineLimits, StepModel

MEASURE = Path(__file__).resolve().parents[2] / "src" / "servelab" / "measure"


def spec_for(name: str, url: str, tmp_path: Path, tok: str, ray_address: str | None = None) -> BenchSpec:
    """Six requests (or three conversations: six turns), four at a time, for driver ``name``."""
    load = LoadSpec(max_concurrency=4, workers=2 if name.endswith("workers") else 1, ray=ray_address)
    dataset = DatasetSpec(name="random", random_input_len=8, random_output_len=4, num_prompts=6)
    multi = MultiTurnSpec()
    backend = "vllm"
    if name == "conversations":
        path = tmp_path / "conversations.jsonl"
        path.write_text("".join(json.dumps({"turns": [f"c{i} one", f"c{i} two"]}) + "\n" for i in range(3)))
        dataset = DatasetSpec(name="custom", path=str(path), num_prompts=3, custom_output_len=4, shuffle=False)
        multi, backend = MultiTurnSpec(enabled=True), "openai-chat"
    if "sessions" in name:  # two sessions of three calls: a call, a sub-agent beside it, the join
        path = tmp_path / "weka.jsonl"
        calls = [{"t": 0, "in": 70, "out": 4, "hash_ids": [1]},
                 {"t": 0, "type": "subagent", "agent_id": "a", "requests": [{"t": 0, "in": 20, "out": 4}]},
                 {"t": 0, "in": 140, "out": 4, "hash_ids": [1, 2]}]
        path.write_text("".join(json.dumps({"id": f"s{i}", "block_size": 64, "requests": calls}) + "\n"
                                for i in range(2)))
        dataset = DatasetSpec(name="weka", path=str(path), trace_scale=0.25)
    simulate = (EngineLimits(max_num_seqs=4), StepModel()) if name.startswith("simulated") else None
    return BenchSpec(server=ServerSpec(base_url=url, backend=backend, model="mock"), load=load, dataset=dataset,
                     multi_turn=multi, output=OutputSpec(progress=False, telemetry=False), tokenizer=tok,
                     simulate=simulate)


@pytest.fixture(scope="module")
def ray_cluster():
    pytest.importorskip("ray")
    from ray_helpers import two_node_cluster

    with two_node_cluster() as cluster:
        yield cluster


@pytest.mark.parametrize("name", sorted(DRIVERS))
def test_every_driver_hands_each_request_to_the_sink_once_with_a_t0_and_an_end(name, mock_server, qwen3_path,
                                                                                tmp_path, request):
    address = request.getfixturevalue("ray_cluster").address if name.endswith("ray") else None
    mock = mock_server(ttft_ms=2, itl_ms=1)
    spec = spec_for(name, mock.url, tmp_path, qwen3_path, address)
    assert spec.driver == name  # the spec picks this driver
    kind = DRIVERS[name]
    tokenizer, work = _prepare(spec, kind, "mock")
    requests = kind.requests(work)
    assert len(requests) == 6
    seen: list[int] = []

    class Counting(RecordSink):
        def add(self, i, record, t0_ns):
            seen.append(i)
            super().add(i, record, t0_ns)

    sink = Counting(Tally(requests))
    started: list[object] = []
    hooks = Hooks(on_start=lambda counters: started.append(counters))
    before = time.perf_counter_ns()
    drove = kind.run(Bench(spec, bench_config(spec, "mock"), work, tokenizer, hooks), sink)
    assert sorted(seen) == list(range(6)), seen  # each request once, none twice
    assert all(r.error is None for r in sink.tally.records())  # every one answered
    out = drove.run.outcome
    assert before <= out.t0_ns <= out.end_ns and not out.interrupted and out.not_sent == 0
    assert len(started) == (0 if not kind.served else 1)  # the t0 hook, once (no server: no waiting, no hook)


@pytest.mark.parametrize("name", [n for n, kind in sorted(DRIVERS.items()) if kind.served and n not in
                                  ("workers", "ray", "sessions_workers", "sessions_ray")])
def test_a_run_in_this_process_starts_at_the_shared_t0_its_hook_gives(name, mock_server, qwen3_path, tmp_path):
    """Client workers and Ray shards pick their start at their own barrier; the drivers in this
    process start at the instant the t0 hook returns, as scale's replicas need."""
    mock = mock_server(ttft_ms=2, itl_ms=1)
    spec = spec_for(name, mock.url, tmp_path, qwen3_path)
    kind = DRIVERS[name]
    tokenizer, work = _prepare(spec, kind, "mock")
    shared = []

    def at_t0(counters) -> int:
        shared.append(time.perf_counter_ns() + 300_000_000)  # 0.3 s ahead, as a replica's lead
        return shared[0]

    sink = RecordSink(Tally(kind.requests(work)))
    drove = kind.run(Bench(spec, bench_config(spec, "mock"), work, tokenizer, Hooks(on_start=at_t0)), sink)
    assert drove.run.outcome.t0_ns == shared[0]
    records = sink.tally.records()
    assert min(r.dispatched_ns for r in records) >= shared[0]  # nothing went before the shared start


# --- measure/ asks the driver, not the spec ---

MODES = {"simulate", "multi_turn", "driver"}  # spec.<mode>
LOAD_MODES = {"ray", "workers"}  # spec.load.<mode>


def mode_reads(path: Path) -> list[str]:
    """Each place ``path`` reads a run's mode from a spec: ``.simulate``, ``.multi_turn``,
    ``.driver`` compared, ``.load.ray``, ``.load.workers``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute):
            if node.attr in MODES - {"driver"}:
                found.append(f"{path.name}:{node.lineno} .{node.attr}")
            elif node.attr in LOAD_MODES and isinstance(node.value, ast.Attribute) and node.value.attr == "load":
                found.append(f"{path.name}:{node.lineno} .load.{node.attr}")
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                if isinstance(side, ast.Attribute) and side.attr == "driver":
                    found.append(f"{path.name}:{node.lineno} .driver compared")
    return found


def test_only_the_drivers_module_reads_the_runs_mode_from_the_spec():
    reads = [r for p in sorted(MEASURE.glob("*.py")) if p.name != "drivers.py" for r in mode_reads(p)]
    assert reads == []
    assert mode_reads(MEASURE / "drivers.py")  # the check sees such reads where they are


def test_every_driver_kind_declares_itself():
    for name, kind in DRIVERS.items():
        assert callable(kind.run) and kind.work in ("requests", "conversations", "sessions"), name
    assert [n for n, k in DRIVERS.items() if not k.served] == ["simulated", "simulated_sessions"]
    assert [n for n, k in DRIVERS.items() if k.work == "conversations"] == ["conversations"]
    assert [n for n, k in DRIVERS.items() if k.work == "sessions"] == ["sessions", "simulated_sessions",
                                                                       "sessions_workers", "sessions_ray"]
