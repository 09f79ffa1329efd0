"""The AgentX-style locked scenario (--agentic-locked: datasets/agentx.py, loadgen/agentx.py)
against the mock's own log of what it received and when (its clock), and its refusals."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from driven import drive

from servelab.config import BenchSpec, DatasetSpec, LoadSpec, OutputSpec, RequestSpec, ServerSpec

from servelab.spec_checks import check_spec
from servelab.datasets.agentic import Blocks, Call, Session
from servelab.datasets.agentx import MARKER_TOKENS, least_s, start_points
from servelab.datasets.sessions import read_sessions
from servelab.errors import InputError


def trace(tmp_path, *conversations: list[dict]) -> str:
    """A WEKA trace: each conversation's main-agent requests."""
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps({"id": f"s{i}", "block_size": 16, "requests": reqs}) + "\n"
                            for i, reqs in enumerate(conversations)))
    return str(path)


def growing(n: int, step: float = 1.0, think: float = 0.01, first: int = 40) -> list[dict]:
    """n calls at t = 0, step, 2·step…, each one block longer than the one before."""
    return [{"t": k * step, "in": first + 16 * k, "out": 4, "hash_ids": list(range(1, (first + 16 * k) // 16 + 1)),
             "think_time": think} for k in range(n)]


def locked(mock, tok: str, path: str, *, min_s: float = 900.0, tick=None, seed: int = 0, lanes=None):
    spec = BenchSpec(server=ServerSpec(base_url=mock.url, backend="vllm", model="mock"),
                     load=LoadSpec(num_warmups=0, ready_check_timeout_s=0, max_sessions=lanes),
                     request=RequestSpec(ignore_eos=True),
                     dataset=DatasetSpec(name="weka", path=path, request_id_prefix="r-", seed=seed,
                                         agentic_locked=True, agentic_min_duration_s=min_s),
                     output=OutputSpec(progress=False, telemetry=False), tokenizer=tok)
    check_spec(spec)  # the locked spec is accepted as it stands
    run = drive(spec, mock=mock, tick=tick)
    work, drove = run.work, run.drove
    truth = mock.truth()
    bodies = {r["headers"]["x-request-id"]: json.loads(r["body"])["prompt"] for r in truth.received
              if r["path"] == "/v1/completions"}
    return work, drove, run.tally.records(), truth, bodies


def test_each_session_starts_with_its_own_marker_its_warm_up_goes_first_and_is_not_counted(
        mock_server, qwen3_path, tmp_path):
    mock = mock_server(ttft_ms=2, itl_ms=1, keep_requests=True)
    path = trace(tmp_path, *[growing(6) for _ in range(4)])
    work, drove, records, truth, bodies = locked(mock, qwen3_path, path)
    about = drove.sections["agentic"]["locked"]
    assert about["warm_up_calls"] == len(work.warm) >= 2  # seed 0 puts most start points past the first call
    # measured + warm-up + left out = every call of the trace
    assert len(work.requests) + about["warm_up_calls"] + about["calls_before_start"] == 24
    got = {r.request_id: r for r in truth.requests}
    warm = sorted(rid for rid in got if rid.endswith("-warmup"))
    measured = [rid for rid in got if not rid.endswith("-warmup")]
    assert warm == sorted(f"r-{s.session_id}-warmup" for s in work.warm)
    assert sorted(measured) == sorted(r.request_id for r in work.requests)
    # on the mock's clock every warm-up was answered before the first measured call arrived
    assert max(got[w].end_ns for w in warm) < min(got[m].recv_ns for m in measured)
    # and none is a record of the run
    assert len(records) == len(work.requests) and not any(r.request_id.endswith("-warmup") for r in records)
    # the marker: every prompt of a session starts with its session's tokens, the rest is the unmarked prompt
    plain = Blocks(work.blocks.vocab)
    marks = {}
    for s in work.sessions:
        for k in range(len(s.calls)):
            body = bodies[f"r-{s.session_id}-{k}"]
            assert body[MARKER_TOKENS:] == plain.prompt(s, k)[MARKER_TOKENS:] and len(body) == s.calls[k].input_len
            marks.setdefault(s.session_id, set()).add(tuple(body[:MARKER_TOKENS]))
    assert all(len(m) == 1 for m in marks.values()) and len(set().union(*marks.values())) == 4  # distinct sessions
    assert all(tuple(plain.prompt(s, 0)[:MARKER_TOKENS]) not in marks[s.session_id] for s in work.sessions)
    # the warm-up carries its session's marker, and its blocks are the measured first call's: its cache is warm
    for s in work.warm:
        shared = len(s.calls[0].blocks) * 16  # its full blocks (the rest of its prompt is its own new tokens)
        assert bodies[f"r-{s.session_id}-warmup"][:shared] == bodies[f"r-{s.session_id}-0"][:shared]
    # another run draws another marker for the same session (runs do not warm each other)
    _, _, _, _, again = locked(mock, qwen3_path, path)
    assert again["r-s0-0"][:MARKER_TOKENS] != bodies["r-s0-0"][:MARKER_TOKENS]
    assert again["r-s0-0"][MARKER_TOKENS:] == bodies["r-s0-0"][MARKER_TOKENS:]
    # under a second: short of AgentX's 900 s, so invalid on purpose
    verdict = about["verdict"]
    assert not verdict["valid"] and verdict["reasons"] == [
        f"shorter than its minimum ({verdict['duration_s']:.1f} s < 900 s)"]
    assert verdict["warm_up"] == {"sent": len(work.warm), "failed": 0} and verdict["context_overflow"]["calls"] == 0


def test_an_idle_gap_is_capped_and_a_run_past_its_minimum_is_valid(mock_server, qwen3_path, tmp_path, monkeypatch):
    """The cap is AgentX's 10 s; made 0.3 s here so the test waits 0.3 s, not 10."""
    monkeypatch.setattr("servelab.datasets.sessions.IDLE_CAP_S", 0.3)
    mock = mock_server(ttft_ms=2, itl_ms=1, keep_requests=True)
    calls = growing(2, step=40.0)
    calls[1]["think_time"] = 30.0  # the user went away for 30 s
    work, drove, records, truth, _ = locked(mock, qwen3_path, trace(tmp_path, calls), min_s=0.2)
    first, second = sorted(truth.requests, key=lambda r: r.recv_ns)  # call 0 (or its warm-up), then call 1
    gap = second.recv_ns - first.event_ns[-1]
    assert 300_000_000 <= gap < 30_000_000_000  # on the mock's clock: the capped wait, not the recorded one
    assert work.about["waits_capped"] == 1 and work.about["max_wait_s"] == 0.3
    verdict = drove.sections["agentic"]["locked"]["verdict"]
    assert verdict["valid"] and verdict["reasons"] == [] and verdict["duration_s"] >= 0.2


def test_context_overflow_past_one_percent_makes_the_run_invalid(mock_server, qwen3_path, tmp_path):
    mock = mock_server(ttft_ms=1, itl_ms=1, keep_requests=True, max_model_len=100, enforce_max_model_len=True)
    # every session's fifth call is 104 tokens: the mock refuses it as vLLM does (and that ends the session)
    work, drove, records, truth, _ = locked(mock, qwen3_path, trace(tmp_path, *[growing(5, step=0.0)] * 3),
                                            min_s=0.01)
    refused = [r for r in truth.requests if r.finish == "too_long"]
    assert len(refused) == 3 and all(r.prompt_tokens >= 100 for r in refused)
    verdict = drove.sections["agentic"]["locked"]["verdict"]
    over = verdict["context_overflow"]
    assert (over["calls"], over["of"]) == (3, len([r for r in truth.requests if not r.request_id.endswith("-warmup")]))
    assert not verdict["valid"] and verdict["reasons"] == [f"context overflow {over['rate']:.1%} of {over['of']} "
                                                           "calls, over 1%"]


def test_a_stopped_run_is_invalid_as_cancelled(mock_server, qwen3_path, tmp_path):
    mock = mock_server(ttft_ms=1, itl_ms=1)
    calls = growing(3, step=0.0, think=5.0)  # 5 s between calls: the tick stops it first
    _, drove, _, _, _ = locked(mock, qwen3_path, trace(tmp_path, calls), min_s=0.01,
                               tick=lambda sink: lambda: "disk full" if sink.tally.records() else None)
    verdict = drove.sections["agentic"]["locked"]["verdict"]
    assert drove.run.ticked == "disk full"
    assert not verdict["valid"] and "cancelled (stopped before its sessions ended)" in verdict["reasons"]


def test_start_points_keep_the_calls_from_the_start_with_the_one_before_as_warm_up():
    calls = (Call("", (1,), 16, 1, (), 0.0, 0.0), Call("", (1, 2), 32, 1, (0,), 0.1, 10.0),
             Call("w", (1,), 16, 1, (1,), 0.0, 11.0),  # a sub-agent spawned by call 1
             Call("", (1, 2, 3), 48, 1, (1, 2), 0.2, 20.0), Call("", (1, 2, 3, 4), 64, 1, (3,), 0.3, 30.0))
    s = Session("a", 16, calls)
    draws = [start_points([s], np.random.default_rng(seed)) for seed in range(40)]
    for (measured,), warm, about in draws:
        t_star = next(c.t_s for c in measured.calls if not c.agent)  # the first measured main call's send
        if not warm:
            assert measured == s  # the start point fell on the first call: all of it, nothing warmed
            continue
        (w,) = warm
        before = [c for c in calls if not c.agent and c.t_s < t_star]
        assert w.calls == (Call("", before[-1].blocks, before[-1].input_len, 1, (), 0.0, before[-1].t_s),)
        # left out: the main calls before the warm-up, and the sub-agent when its spawner (call 1) was
        assert about["calls_before_start"] == {0.0: 0, 10.0: 1, 20.0: 3}[w.calls[0].t_s]
        # the kept calls' parents point inside the kept session
        assert all(p < i for i, c in enumerate(measured.calls) for p in c.parents)
    # call 1 as the warm-up: its sub-agent is measured as a root, the join waits for it
    (cut,), (w,), _ = next(d for d in draws if d[1] and d[1][0].calls[0].t_s == 10.0)
    assert [(c.agent, c.parents) for c in cut.calls] == [("w", ()), ("", (0,)), ("", (1,))]
    assert {d[1][0].calls[0].t_s for d in draws if d[1]} == {0.0, 10.0, 20.0}  # every start point is drawn


@pytest.mark.parametrize("change, conflict", [
    ({"dataset": DatasetSpec(name="agentic", agentic_locked=True)}, "--dataset-name agentic (a recorded trace"),
    ({"load": LoadSpec(request_rate=2.0)}, "--request-rate (every session starts at once)"),
    ({"dataset": DatasetSpec(name="weka", path="t", agentic_locked=True, trace_scale=0.5)},
     "--trace-scale 0.5 (every recorded token is sent)"),
    ({"dataset": DatasetSpec(name="weka", path="t", agentic_locked=True, trace_max_wait_s=5.0)},
     "--trace-max-wait 5.0 (idle gaps are capped at 10 s)"),
    ({"request": RequestSpec()}, "no --ignore-eos (each call produces its recorded output length)"),
    ({"load": LoadSpec(workers=2)}, "--workers, --ray or --simulate (one client replays the locked scenario)"),
])
def test_a_conflicting_flag_is_refused_in_one_line(change, conflict):
    base = {"dataset": DatasetSpec(name="weka", path="t", agentic_locked=True), "request": RequestSpec(ignore_eos=True)}
    with pytest.raises(InputError, match=r"^--agentic-locked replays the trace one fixed way; it conflicts with: "):
        try:
            check_spec(BenchSpec(**{**base, **change}))
        except InputError as e:
            assert conflict in str(e) and "\n" not in str(e)
            raise
    check_spec(BenchSpec(**base))  # accepted as it stands
    with pytest.raises(InputError, match="^--agentic-min-duration is for --agentic-locked$"):
        check_spec(BenchSpec(dataset=DatasetSpec(name="weka", path="t", agentic_min_duration_s=60.0)))


def test_the_locked_sessions_cap_waits_at_ten_seconds(tmp_path):
    calls = growing(2)
    calls[1]["think_time"] = 3600.0
    sessions, about = read_sessions(DatasetSpec(name="weka", path=trace(tmp_path, calls), agentic_locked=True))
    assert sessions[0].calls[1].wait_s == 10.0 and (about["max_wait_s"], about["waits_capped"]) == (10.0, 1)


def test_on_the_sim_engine_the_warm_ups_warm_the_measured_calls_to_their_ideal_hit_rate(sim_server, qwen3_path,
                                                                                       tmp_path):
    """The ideal sees each warm-up first and counts only the measured calls; the simulator's
    block manager, queried by the warm-ups and then the run, finds exactly that."""
    from servelab.loadgen.sessions import ideal_rate
    from servelab.sim.model import EngineLimits

    server = sim_server(EngineLimits(num_blocks=4096, block_size=16))
    spec = BenchSpec(server=ServerSpec(base_url=server.url, backend="vllm", model="mock"),
                     load=LoadSpec(num_warmups=0, ready_check_timeout_s=0), request=RequestSpec(ignore_eos=True),
                     dataset=DatasetSpec(name="weka", path=trace(tmp_path, *[growing(6, think=0.0)] * 4),
                                         agentic_locked=True, agentic_min_duration_s=0.01),
                     output=OutputSpec(progress=False, telemetry=False), tokenizer=qwen3_path)
    run = drive(spec)
    work, drove = run.work, run.drove
    c = server.engine.counters
    warm = [r for r in server.truth.requests if r.request_id.endswith("-warmup")]
    assert len(warm) == len(work.warm) >= 2
    queried = c.prefix_queries - sum(r.prompt_tokens for r in warm)  # the warm-ups found nothing: sessions differ
    assert queried == sum(r.prompt_len for r in work.requests)
    ideal = ideal_rate(work)
    assert c.prefix_hits / queried == pytest.approx(ideal, abs=1e-12) and ideal > ideal_rate(
        dataclasses.replace(work, warm=()))  # the warm-ups' blocks count
    assert drove.sections["agentic"]["ideal_prefix_cache_hit_rate"] == round(ideal, 4)




def test_an_otel_export_replayed_on_the_sim_engine_gets_its_ideal_hit_rate(sim_server, qwen3_path):
    from pathlib import Path

    from servelab.sim.model import EngineLimits

    example = Path(__file__).resolve().parents[2] / "docs" / "examples" / "agentic_otel.jsonl"
    server = sim_server(EngineLimits(num_blocks=4096, block_size=16))
    spec = BenchSpec(server=ServerSpec(base_url=server.url, backend="vllm", model="mock"),
                     load=LoadSpec(num_warmups=0, ready_check_timeout_s=0),
                     dataset=DatasetSpec(name="otel", path=str(example), trace_max_wait_s=0.05),
                     output=OutputSpec(progress=False, telemetry=False), tokenizer=qwen3_path)
    run = drive(spec)
    drove = run.drove
    c = server.engine.counters
    assert (c.prefix_hits, c.prefix_queries) == (1424, 2660)
    assert drove.sections["agentic"]["ideal_prefix_cache_hit_rate"] == round(1424 / 2660, 4)


def test_bench_refuses_a_locked_run_with_a_request_rate_in_one_line_before_any_server(capsys, tmp_path):
    from servelab.cli.main import main

    argv = ["bench", "--base-url", "http://127.0.0.1:9", "--dataset-name", "weka", "--dataset-path",
            trace(tmp_path, growing(2)), "--agentic-locked", "--ignore-eos", "--request-rate", "4", "--trace-scale",
            "0.5"]
    assert main(argv) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["servelab: error: --agentic-locked replays the trace one fixed way; it conflicts with: --request-rate "
                   "(every session starts at once); --trace-scale 0.5 (every recorded token is sent)"]


def test_lanes_recycle_until_the_minimum_each_session_whole_after_the_first(mock_server, qwen3_path, tmp_path):
    """--max-sessions 2 over 4 sessions, --agentic-min-duration 2 s: two lanes start mid-trajectory with a
    warm-up, as AgentX's first sessions; then each lane, when its session has drained, takes the next in
    order — s2, s3, then the trace again (s0@2…) — each whole from its first call, until 2 s after t0.
    On the mock's clock: every later session arrived after a session had drained, none after the
    deadline, and the run lasted past it. The run's requests are the sessions taken, not those drawn."""
    mock = mock_server(ttft_ms=2, itl_ms=1, keep_requests=True)
    path = trace(tmp_path, *[growing(6, step=1.0, think=0.05) for _ in range(4)])
    work, drove, records, truth, bodies = locked(mock, qwen3_path, path, lanes=2, seed=3, min_s=2.0)
    section = drove.sections["agentic"]
    about = section["locked"]
    assert {s.session_id for s in work.warm} <= {"s0", "s1"} and len(work.warm) >= 1
    # drawn ahead: the sessions' least times cover 2 lanes × (2 s + the longest session), and no more
    least = [least_s(s) for s in work.sessions]
    assert about["recycled"]["lanes_covered"] and about["recycled"]["sessions_drawn_ahead"] == len(least) - 4
    assert sum(least[:-1]) < 2 * (2.0 + max(least)) <= sum(least)
    taken = [p["session"] for p in section["per_session"]]
    assert taken[:4] == ["s0", "s1", "s2", "s3"] and taken[4] == "s0@2" and section["sessions"] == len(taken)
    assert len(taken) < len(work.sessions)  # the lanes stopped taking before the pool ran out
    assert all(p["calls"] == p["sent"] == 6 for p in section["per_session"][2:])  # whole, every call answered
    got = {r.request_id: r for r in truth.requests}
    first_arrival = {sid: got[f"r-{sid}-0"].recv_ns for sid in taken}
    drained = {sid: max(r.event_ns[-1] for rid, r in got.items() if rid.startswith(f"r-{sid}-")
                        and not rid.endswith("-warmup")) for sid in taken}
    t0 = drove.run.outcome.t0_ns
    root = {r.request_id: r.intended_ns for r in records}  # the client's plan: a session's start + its root's wait
    wait = round(work.sessions[2].calls[0].wait_s * 1e9)
    for k, sid in enumerate(taken[2:], start=2):  # a lane freed before it (k sessions before it, 2 lanes)
        assert sorted(drained[x] for x in taken[:k])[k - 2] < first_arrival[sid]
        assert root[f"r-{sid}-0"] - wait < t0 + 2_000_000_000  # taken before the deadline
    assert drove.run.outcome.end_ns - t0 >= 2_000_000_000 and about["verdict"]["valid"]
    # the run's requests are the sessions taken: none unsent, nothing early, the tally cut to them
    assert len(records) == len(truth.requests) - len(work.warm) == section["calls"]
    assert drove.drawn == section["calls"] and not drove.run.outcome.interrupted
    assert drove.run.outcome.not_sent == 0


def test_the_sessions_drawn_ahead_cover_every_lane_for_the_minimum_by_their_least_times():
    """No session ends sooner than its longest chain of waits: drawn ahead until those add up to
    lanes × (minimum + the longest session), so the lanes cannot run out before the minimum; a trace
    with no waits is drawn up to the call cap, and says the lanes were not covered."""
    from servelab.datasets.agentx import POOL_CALLS, recycled

    def call(wait, parents=()):
        return Call("", (), 16, 4, parents, wait)

    a = Session("a", 16, (call(0.1), call(0.1, (0,))))  # a chain: 0.2 s
    b = Session("b", 16, (call(0.0), call(0.5, (0,)), call(0.2, (0,))))  # two branches: the longer, 0.5 s
    assert [least_s(a), least_s(b)] == [pytest.approx(0.2), pytest.approx(0.5)]
    pool, info = recycled([a, b], [a, b], lanes=2, min_duration_s=1.0)  # need 2 × 1.5 = 3.0 s, have 0.7
    assert [s.session_id for s in pool] == ["a@2", "b@2", "a@3", "b@3", "a@4", "b@4", "a@5"]  # 0.7 + 2.3
    assert pool[1].calls == b.calls and info["recycled"]["lanes_covered"]
    twice, _ = recycled([a, a], [a, a], lanes=1, min_duration_s=0.5)  # one id twice in the trace
    assert [s.session_id for s in twice] == ["a@2", "a#2@2"]  # each copy its own id, so its own marker
    flat = Session("z", 16, (call(0.0), call(0.0, (0,))))
    pool, info = recycled([flat], [flat], lanes=1, min_duration_s=1.0)
    assert POOL_CALLS - 2 < sum(len(s.calls) for s in pool) + 2 <= POOL_CALLS  # up to the cap, whole sessions
    assert not info["recycled"]["lanes_covered"]


def test_every_session_taken_is_described_even_when_the_lanes_took_all_drawn():
    """A trace with no waits runs its lanes out of the sessions drawn ahead: the result's figures are
    still those of the sessions taken, not of the trace before the draw."""
    from servelab.datasets.agentic import bundle, describe

    one = Session("a", 16, (Call("", (), 16, 4), Call("", (), 32, 4, (0,))))
    work = bundle([one, dataclasses.replace(one, session_id="a@2")], "r-", describe([one]), until_s=1.0)
    for n in (1, 2):
        taken = work.taken(n)
        assert (taken.about["sessions"], taken.about["calls"], len(taken.requests)) == (n, 2 * n, 2 * n)


def test_a_recycled_run_through_bench_counts_only_the_sessions_taken(mock_server, qwen3_path, tmp_path):
    """`servelab bench` end to end: the result's accounting, records and adapter counts are the sessions
    the lanes took (what the mock received), never the ones drawn ahead and left."""
    from servelab.cli.main import main

    mock = mock_server(ttft_ms=2, itl_ms=1, keep_requests=True)
    path = trace(tmp_path, growing(3, think=0.05), growing(3, think=0.05))
    args = ["bench", "--backend", "vllm", "--base-url", mock.url, "--model", "mock", "--tokenizer", qwen3_path,
            "--dataset-name", "weka", "--dataset-path", path, "--agentic-locked", "--ignore-eos",
            "--max-sessions", "1", "--agentic-min-duration", "1", "--lora-modules", "a1", "a2",
            "--lora-assignment", "round-robin", "--disable-tqdm", "--no-telemetry", "--save-result",
            "--result-dir", str(tmp_path), "--result-filename", "r.json"]
    assert main(args) == 0
    result = json.loads((tmp_path / "r.json").read_text())
    received = [r for r in mock.truth().requests if not r.request_id.endswith("-warmup")]
    section = result["servelab"]["agentic"]
    assert section["locked"]["recycled"]["sessions_drawn_ahead"] > section["sessions"] - 2
    assert result["completed"] == len(received) == section["calls"]
    assert result["servelab"]["ending"] == {**result["servelab"]["ending"], "early": False,
                                           "meant": len(received), "never_sent": 0}
    assert sum(result["servelab"]["lora"]["requests"].values()) == len(received)
    assert len((tmp_path / "r.records.jsonl").read_text().splitlines()) == len(received)
