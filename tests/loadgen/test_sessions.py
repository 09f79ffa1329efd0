"""Agentic session replay (loadgen/sessions.py) against the mock's own record of what it
received (order, token ids, its clock), and the trace's ideal prefix-cache hit rate against
the simulator's block manager."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from driven import drive

from servelab.config import BenchSpec, DatasetSpec, LoadSpec, OutputSpec, ServerSpec
from servelab.datasets.agentic import Blocks, Call, Session
from servelab.datasets.sessions import read_sessions
from servelab.datasets.agentic import ideal_hits
from servelab.loadgen.sessions import summary_line
from servelab.sim.kv import block_hashes
from servelab.sim.model import EngineLimits, SimRequest, StepModel
from servelab.sim.simulate import simulate

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "agentic_weka.jsonl"
VOCAB = list(range(1000, 3000))


def replay(mock, tok: str, **load):
    spec = BenchSpec(server=ServerSpec(base_url=mock.url, backend="vllm", model="mock"),
                     load=LoadSpec(**{"num_warmups": 0, **load}),
                     dataset=DatasetSpec(name="weka", path=str(EXAMPLE), request_id_prefix="r-"),
                     output=OutputSpec(progress=False, telemetry=False), tokenizer=tok)
    run = drive(spec, mock=mock)
    return run.work, run.drove, run.tally.records(), mock.truth()


def test_each_call_goes_as_its_blocks_token_ids_in_dag_order_with_its_waits(mock_server, qwen3_path):
    mock = mock_server(ttft_ms=30, itl_ms=5, keep_requests=True)
    work, drove, records, truth = replay(mock, qwen3_path)
    got = {r.request_id: r for r in truth.requests}
    bodies = {r["headers"]["x-request-id"]: json.loads(r["body"]) for r in truth.received}
    assert len(got) == 8 and len(bodies) == 8
    blocks = Blocks(work.blocks.vocab)
    for s in work.sessions:
        for k, call in enumerate(s.calls):
            body = bodies[f"r-{s.session_id}-{k}"]
            assert body["prompt"] == blocks.prompt(s, k) and len(body["prompt"]) == call.input_len
            assert body["max_tokens"] == call.output_len
    fix = {k: got[f"r-fix-bug-{k}"] for k in range(5)}

    def wrote_last(r) -> int:
        """The mock's stamp of its last content write: before the client can see the reply end
        (its end_ns is stamped after the final write, and may follow the client's own end)."""
        return r.event_ns[-1]

    # the two sub-agents start after call 0 ended and run side by side (each arrived before the other ended)
    for k in (1, 3):
        assert fix[k].recv_ns > wrote_last(fix[0])
    assert fix[1].recv_ns < fix[3].end_ns and fix[3].recv_ns < fix[1].end_ns
    # explore1's second call 0.2 s after its first; the join 0.3 s after the last of all it waits for
    assert fix[2].recv_ns - wrote_last(fix[1]) >= 200_000_000
    assert fix[4].recv_ns - max(wrote_last(fix[k]) for k in (0, 2, 3)) >= 300_000_000
    # add-test: a background sub-agent after the last call of its parent
    add = {k: got[f"r-add-test-{k}"] for k in range(3)}
    assert add[1].recv_ns - wrote_last(add[0]) >= 500_000_000 and add[2].recv_ns > wrote_last(add[1])
    # the prompts that share blocks carry the same ids: explore1's call 2 starts with its call 1's block
    assert bodies["r-fix-bug-2"]["prompt"][:64] == bodies["r-fix-bug-1"]["prompt"][:64]
    assert bodies["r-fix-bug-1"]["prompt"][:64] != bodies["r-fix-bug-0"]["prompt"][:64]  # its own scope
    section = drove.sections["agentic"]
    assert [(s["session"], s["calls"], s["sent"], s["cut"]) for s in section["per_session"]] == [
        ("fix-bug", 5, 5, False), ("add-test", 3, 3, False)]
    # the makespan: its first send to its last reply, at least the mock's own span of the session
    span = (max(r.end_ns for r in fix.values()) - min(r.recv_ns for r in fix.values())) / 1e9
    assert section["per_session"][0]["makespan_s"] >= span
    assert {(r.conversation_id, r.turn) for r in records} == {
        (s.session_id, k) for s in work.sessions for k in range(len(s.calls))}
    assert all(r.ttft_ns > 0 and r.e2el_ns >= r.ttft_ns for r in records)
    by_call = {(r.conversation_id, r.turn): r for r in records}
    for s in section["per_session"]:  # each call's TTFT and E2E, in call order, as its record has them
        assert s["ttft_ms"] == [round(by_call[s["session"], k].ttft_ns / 1e6, 3) for k in range(s["calls"])]
        assert s["e2e_ms"] == [round(by_call[s["session"], k].e2el_ns / 1e6, 3) for k in range(s["calls"])]
    assert section["scaled"] is False and section["ideal_at_block_size"] == 16
    spans = sorted(s["makespan_s"] for s in section["per_session"])
    assert summary_line(section) == (
        f"servelab: agentic: 2 sessions, 8 calls, 3 sub-agents (fan-out up to 2); makespan {spans[1]:.2f} s median, "
        f"{spans[1]:.2f} s max; 0 cut; ideal prefix-cache hit rate 25.4% at block size 16")


def test_a_failed_call_cuts_its_session_and_its_dependants_are_never_sent(mock_server, qwen3_path):
    mock = mock_server(error_rate=1.0, keep_requests=True)
    _, drove, records, truth = replay(mock, qwen3_path, ready_check_timeout_s=0)
    assert sorted(r.request_id for r in truth.requests) == ["r-add-test-0", "r-fix-bug-0"]  # the roots only
    assert [(s["failed"], s["abandoned"], s["cut"]) for s in drove.sections["agentic"]["per_session"]] == [
        (1, 4, True), (1, 2, True)]
    assert len(records) == 2 and all(r.error for r in records)
    assert drove.sections["agentic"]["per_session"][1]["ttft_ms"] == [None, None, None]
    assert drove.run.outcome.not_sent == 6 and not drove.run.outcome.interrupted


def ideal_prefix_hits(prompts, block_size: int) -> tuple[int, int]:
    """The ideal from the tokens themselves, chained block hashes as the simulator keys its cache
    (sim/kv.py): the reference ``datasets.agentic.ideal_hits`` must equal."""
    seen: set[int] = set()
    hits = queries = 0
    for ids in prompts:
        hashes = block_hashes(ids, block_size)
        run = 0
        for h in hashes[:max(len(ids) - 1, 0) // block_size]:
            if h not in seen:
                break
            run += 1
        hits += run * block_size
        queries += len(ids)
        seen.update(hashes)
    return hits, queries


def test_ideal_prefix_hits_count_full_blocks_seen_before_leaving_the_last_token_to_compute():
    a = list(range(10))
    assert ideal_prefix_hits([a], 4) == (0, 10)
    assert ideal_prefix_hits([a, a], 4) == (8, 20)  # 2 full blocks found again
    assert ideal_prefix_hits([a[:8], a[:8]], 4) == (4, 16)  # a prompt found whole keeps its last block
    assert ideal_prefix_hits([a, [99] + a[1:]], 4) == (0, 20)  # a chain: a changed first block breaks it


@pytest.mark.parametrize("block_size", [16, 5, 64, 100])
@pytest.mark.parametrize("scale_by", [1.0, 0.3])
def test_the_ideal_worked_out_from_the_model_equals_the_ideal_from_the_tokens(block_size, scale_by):
    import numpy as np

    from servelab.datasets.agentic import scale
    from servelab.datasets.agentic_synth import Shape, synthesize

    blocks = Blocks(VOCAB)
    example, _ = read_sessions(DatasetSpec(name="weka", path=str(EXAMPLE)))
    drawn = synthesize(6, Shape(fan_out_p=0.5), np.random.default_rng(4))
    for sessions in (scale(example, scale_by), scale(drawn, scale_by)):
        prompts = [blocks.prompt(s, k) for s in sessions for k in range(len(s.calls))]
        hits, queries = ideal_hits(sessions, block_size)
        assert (hits, queries) == ideal_prefix_hits(prompts, block_size) and queries > 0
        assert hits > 0 or block_size >= 64  # the small blocks find reuse: the equality compares something


def sim_rate(prompts: list[list[int]], num_blocks: int) -> tuple[float, float]:
    """(the simulator's prefix-cache hit rate, the ideal) for ``prompts`` sent one at a time."""
    requests = [SimRequest(i * 1_000_000_000, len(p), 1, tuple(p)) for i, p in enumerate(prompts)]
    counters = simulate(requests, EngineLimits(num_blocks=num_blocks, block_size=16), StepModel()).counters
    hits, queries = ideal_prefix_hits(prompts, 16)
    return counters.prefix_hits / counters.prefix_queries, hits / queries


def test_a_trace_smaller_than_the_cache_gets_its_ideal_rate_on_the_simulator_and_a_larger_one_less():
    sessions, _ = read_sessions(DatasetSpec(name="weka", path=str(EXAMPLE)))
    blocks = Blocks(VOCAB)
    prompts = [blocks.prompt(s, k) for s in sessions for k in range(len(s.calls))]
    measured, ideal = sim_rate(prompts, num_blocks=4096)
    # explore1's call 2 finds its block 1 (64 tokens); each main agent's later call its blocks 1-2 (128);
    # add-test's block 3, 12 tokens in its first call, is no full block at 16 there: 320 of 1,260 tokens
    assert ideal == 320 / 1260 and measured == ideal
    # one long context and 8 others, each reused after the rest: an LRU cache of 24 blocks holds none
    long = [Session(f"s{i}", 64, (Call("", (1, 2, 3, 4), 256, 1), Call("", (1, 2, 3, 4), 300, 1, (0,))))
            for i in range(3)]
    firsts = [blocks.prompt(s, 0) for s in long]
    prompts = firsts + [blocks.prompt(s, 1) for s in long]
    small, ideal = sim_rate(prompts, num_blocks=24)
    assert ideal == pytest.approx(3 * 256 / (3 * 256 + 3 * 300)) and small < ideal
    assert sim_rate(prompts, num_blocks=4096)[0] == ideal


@pytest.mark.parametrize("scale", [1.0, 0.5])
def test_replayed_on_the_sim_engine_the_trace_gets_its_ideal_hit_rate_from_its_block_manager(sim_server, scale,
                                                                                              qwen3_path):
    server = sim_server(EngineLimits(num_blocks=4096, block_size=16))
    spec = BenchSpec(server=ServerSpec(base_url=server.url, backend="vllm", model="mock"),
                     load=LoadSpec(num_warmups=1),  # the ready check and a warm-up: neither may warm the cache
                     dataset=DatasetSpec(name="weka", path=str(EXAMPLE), trace_scale=scale),
                     output=OutputSpec(progress=False, telemetry=False), tokenizer=qwen3_path)
    run = drive(spec)
    work, drove = run.work, run.drove
    c = server.engine.counters
    warm = [r for r in server.truth.requests if r.request_id.endswith("-warmup")]
    assert warm  # the ready check's probe and the warm-up went first: queried, never hit
    probes = sum(r.prompt_tokens for r in warm)
    assert c.prefix_queries - probes == sum(r.prompt_len for r in work.requests)
    assert round(c.prefix_hits / (c.prefix_queries - probes), 4) == drove.sections["agentic"][
        "ideal_prefix_cache_hit_rate"] == round(320 / 1260, 4)


def test_synthetic_sessions_keep_every_parent_before_its_child_on_the_mocks_clock(mock_server, qwen3_path):
    """Fan-out and joins drawn from the seed: each call arrived after every parent's reply
    was written, plus its wait; each went once, as its own token ids."""
    import numpy as np

    from servelab.datasets.agentic import bundle, describe
    from servelab.datasets.agentic_synth import Shape, synthesize

    mock = mock_server(ttft_ms=5, itl_ms=1, keep_requests=True)
    sessions = synthesize(4, Shape(tool_wait_s=0.02, fan_out_p=0.5), np.random.default_rng(5))
    assert any(c.agent for s in sessions for c in s.calls)  # the draw has sub-agents to check
    work = bundle(sessions, "r-", describe(sessions), Blocks(VOCAB))
    spec = BenchSpec(server=ServerSpec(base_url=mock.url, backend="vllm", model="mock"),
                     load=LoadSpec(num_warmups=0, ready_check_timeout_s=0, max_concurrency=4),
                     dataset=DatasetSpec(name="agentic"), output=OutputSpec(progress=False, telemetry=False),
                     tokenizer=qwen3_path)
    drive(spec, work=work)
    truth = mock.truth()
    got = {r.request_id: r for r in truth.requests}
    bodies = {r["headers"]["x-request-id"]: json.loads(r["body"])["prompt"] for r in truth.received}
    assert sorted(got) == sorted(r.request_id for r in work.requests)
    for s in sessions:
        for k, call in enumerate(s.calls):
            me = got[f"r-{s.session_id}-{k}"]
            assert bodies[me.request_id] == work.blocks.prompt(s, k)
            for p in call.parents:
                assert me.recv_ns - got[f"r-{s.session_id}-{p}"].event_ns[-1] >= round(call.wait_s * 1e9)
    assert max(truth.open_n) <= 4  # the cap holds calls in flight


def test_a_stop_mid_run_keeps_what_completed_and_reports_the_unfinished_sessions_cut(mock_server, qwen3_path):
    """The tick stops the run once the first calls were answered: a call waiting for its
    parents or its wait is never sent, an answered one is kept, and nothing raises."""
    mock = mock_server(ttft_ms=5, itl_ms=1)
    spec = BenchSpec(server=ServerSpec(base_url=mock.url, backend="vllm", model="mock"),
                     load=LoadSpec(num_warmups=0, ready_check_timeout_s=0),
                     dataset=DatasetSpec(name="weka", path=str(EXAMPLE), request_id_prefix="r-"),
                     output=OutputSpec(progress=False, telemetry=False), tokenizer=qwen3_path)
    run = drive(spec, tick=lambda sink: lambda: "disk full" if sink.tally.records() else None)
    drove, records = run.drove, run.tally.records()
    assert drove.run.ticked == "disk full" and drove.run.outcome.interrupted
    assert 1 <= len(records) < 8 and all(r.error is None for r in records)  # add-test-1 waits 0.5 s: never sent
    assert "r-add-test-1" not in {r.request_id for r in records}
    cut = {s["session"]: s["cut"] for s in drove.sections["agentic"]["per_session"]}
    assert cut == {"fix-bug": True, "add-test": True}
    assert 1 <= drove.run.outcome.not_sent <= 8 - len(records)  # the unsent; a call cut in flight is neither


def test_on_a_served_engine_the_measured_rate_comes_from_its_metrics_beside_the_ideal_at_its_block_size(
        sim_server, qwen3_path, capsys):
    """Telemetry on: the sim server's /metrics give its block size (cache_config_info) and its
    prefix-cache counters; no probe goes first, so its counters are the calls' alone."""
    from servelab.measure.run import execute

    server = sim_server(EngineLimits(num_blocks=4096, block_size=32))
    spec = BenchSpec(server=ServerSpec(base_url=server.url, backend="vllm", model="mock"),
                     load=LoadSpec(num_warmups=0, ready_check_timeout_s=0),
                     dataset=DatasetSpec(name="weka", path=str(EXAMPLE)),
                     output=OutputSpec(progress=False, telemetry_interval_s=0.05), tokenizer=qwen3_path)
    agentic = execute(spec).result["servelab"]["agentic"]
    c = server.engine.counters
    assert (c.prefix_hits, c.prefix_queries) == (320, 1260)
    assert agentic["ideal_at_block_size"] == 32 and agentic["block_size_source"] == (
        "engine metrics (vllm:cache_config_info)")
    assert agentic["measured_prefix_cache"] == {"rate": 0.254, "hits": 320, "queries": 1260,
                                                "source": "engine metrics (prefix_cache_hits / queries)"}
    assert agentic["ideal_prefix_cache_hit_rate"] == 0.254
    out = capsys.readouterr().out
    assert "ideal prefix-cache hit rate 25.4% at block size 32; 25.4% measured (engine metrics" in out
    assert agentic["cache_warm_before_run"] is False and "above the ideal" not in out
    # the same trace again on the same engine: its blocks are cached from the first run, so the
    # measured rate passes the ideal, which no cold cache can; the result and the line say so
    again = execute(spec).result["servelab"]["agentic"]
    assert again["measured_prefix_cache_hit_rate"] > again["ideal_prefix_cache_hit_rate"] == 0.254
    assert again["cache_warm_before_run"] is True
    assert ("above the ideal: the cache held this trace's blocks before the run (an earlier run's)"
            in capsys.readouterr().out)


def test_the_engines_block_size_is_read_from_what_the_run_knows_else_assumed():
    from servelab.measure.session_cache import engine_block_size, measured
    from servelab.telemetry.timeline import Timeline

    metrics = Timeline({"engine": {"cache_config": {"block_size": "32"}}}, [])
    assert engine_block_size(metrics, {"args": ["--block-size", "64"]}) == (32, "engine metrics (vllm:cache_config_info)")
    assert engine_block_size(None, {"memory_report": {"block_size": 128}, "args": ["--block-size", "64"]}) == (
        128, "engine memory report")
    assert engine_block_size(Timeline({}, []), {"args": ["--model", "m", "--block-size=64"]}) == (
        64, "engine args (--block-size)")
    assert engine_block_size(None, None) == (16, "assumed (vLLM's default; the engine did not say)")
    assert measured(None, None)["rate"] is None  # no counters: unknown, not 0


def _under_way(truth, sessions) -> dict[str, tuple[int, int]]:
    """Per session, on the mock's clock: its first call's arrival and its last reply's last write."""
    got = {r.request_id: r for r in truth.requests}
    return {s.session_id: (min(got[f"r-{s.session_id}-{k}"].recv_ns for k in range(len(s.calls))),
                           max(got[f"r-{s.session_id}-{k}"].event_ns[-1] for k in range(len(s.calls))))
            for s in sessions}


@pytest.mark.parametrize("lanes", [None, 2])
def test_max_sessions_holds_sessions_to_their_lanes_on_the_mocks_clock(mock_server, qwen3_path, lanes):
    """At each session's first arrival, fewer than ``lanes`` other sessions were under way (first arrival
    to last write, sub-agents included), and a session waited for one to end; without lanes all six
    start at once."""
    import numpy as np

    from servelab.datasets.agentic import bundle, describe
    from servelab.datasets.agentic_synth import Shape, synthesize

    mock = mock_server(ttft_ms=5, itl_ms=1, keep_requests=True)
    sessions = synthesize(6, Shape(tool_wait_s=0.02, fan_out_p=0.5), np.random.default_rng(5))
    work = bundle(sessions, "r-", describe(sessions), Blocks(VOCAB))
    spec = BenchSpec(server=ServerSpec(base_url=mock.url, backend="vllm", model="mock"),
                     load=LoadSpec(num_warmups=0, ready_check_timeout_s=0, max_sessions=lanes),
                     dataset=DatasetSpec(name="agentic"), output=OutputSpec(progress=False, telemetry=False),
                     tokenizer=qwen3_path)
    drive(spec, work=work, mock=mock)
    spans = _under_way(mock.truth(), sessions)
    overlap = {sid: sum(1 for other, (a, b) in spans.items() if other != sid and a <= start < b)
               for sid, (start, _) in spans.items()}
    if lanes is None:
        assert max(overlap.values()) == 5
        return
    assert max(overlap.values()) <= lanes - 1
    late = [sid for sid, (start, _) in spans.items() if any(b < start for other, (_, b) in spans.items()
                                                             if other != sid)]
    assert len(late) == 4  # four sessions took a lane another had left
