"""Agentic sessions split between client workers or Ray nodes (loadgen/session_shards.py): a
session stays on one shard, and the shards together send exactly the single-process run,
checked against the mock's own record of what it received and on which connection."""

from __future__ import annotations

import json

import pytest
from driven import drive

from servelab.config import BenchSpec, DatasetSpec, LoadSpec, OutputSpec, ServerSpec
from servelab.loadgen.session_shards import merged, split_sessions
from servelab.measure.drivers import DRIVERS
from servelab.measure.run import _prepare
from servelab.measure.target import bench_config

SHAPE = (("tool_wait_s", "0.02"), ("fan_out_p", "0.5"), ("turns", "2:4"))


def spec_for(url: str, tok: str, **load) -> BenchSpec:
    return BenchSpec(server=ServerSpec(base_url=url, backend="vllm", model="mock"),
                     load=LoadSpec(num_warmups=0, ready_check_timeout_s=0, max_concurrency=4, **load),
                     dataset=DatasetSpec(name="agentic", num_prompts=6, seed=7, agentic_shape=SHAPE,
                                         request_id_prefix="r-"),
                     output=OutputSpec(progress=False, telemetry=False), tokenizer=tok)


def replay(mock, spec: BenchSpec):
    run = drive(spec, mock=mock)
    return run.work, run.drove, run.tally, mock.truth()


def sent(truth) -> dict:
    """What the mock received, by request id: (prompt, max_tokens)."""
    return {r["headers"]["x-request-id"]: (tuple(json.loads(r["body"])["prompt"]), json.loads(r["body"])["max_tokens"])
            for r in truth.received if r["path"] == "/v1/completions"}


@pytest.fixture(scope="module")
def ray_cluster():
    pytest.importorskip("ray")
    from ray_helpers import two_node_cluster

    with two_node_cluster() as cluster:
        yield cluster


@pytest.mark.parametrize("how", ["workers", "ray"])
def test_each_session_comes_from_one_shard_and_the_shards_send_the_single_process_run(how, mock_server, qwen3_path,
                                                                                      request):
    mock = mock_server(ttft_ms=3, itl_ms=1, keep_requests=True)
    work, one, one_tally, one_truth = replay(mock, spec_for(mock.url, qwen3_path))
    split = dict(workers=2) if how == "workers" else dict(ray=request.getfixturevalue("ray_cluster").address)
    spec = spec_for(mock.url, qwen3_path, **split)
    assert spec.driver == f"sessions_{how}"
    _, two, two_tally, two_truth = replay(mock, spec)
    # the same calls, each once, with the same token ids and lengths
    assert sent(two_truth) == sent(one_truth) and len(two_truth.received) == len(work.requests)
    assert two_tally.added == one_tally.added == len(work.requests)
    assert [r.request_id for r in two_tally.records()] == [r.request_id for r in one_tally.records()]
    assert sum(r.prompt_len for r in two_tally.records()) == sum(r.prompt_len for r in one_tally.records())
    keep = ("session", "calls", "sent", "failed", "abandoned", "cut")
    a, b = (d.sections["agentic"] for d in (one, two))
    assert [{k: s[k] for k in keep} for s in b["per_session"]] == [{k: s[k] for k in keep} for s in a["per_session"]]
    assert b["ideal_prefix_cache_hit_rate"] == a["ideal_prefix_cache_hit_rate"]
    assert all(None not in s["ttft_ms"] and s["makespan_s"] > 0 for s in b["per_session"])
    # a session stays on one shard: session j on shard j % 2, and no connection of one shard's
    # client carries a call of the other's (a connection belongs to one process)
    shard_of = {f"r-{s.session_id}-{k}": si % 2 for si, s in enumerate(work.sessions) for k in range(len(s.calls))}
    ports: list[set] = [set(), set()]
    for r in two_truth.received:
        ports[shard_of[r["headers"]["x-request-id"]]].add(tuple(r["peer"]))
    assert ports[0] and ports[1] and not ports[0] & ports[1]
    assert two.sections["workers"]["count"] == 2


def test_whole_sessions_are_dealt_with_their_starts_and_a_lost_shards_sessions_are_reported_cut(qwen3_path):
    spec = spec_for("http://127.0.0.1:9", qwen3_path, workers=2)
    kind = DRIVERS[spec.driver]
    _, work = _prepare(spec, kind, "mock")
    shards = split_sessions(bench_config(spec, "mock"), work, 4, "--workers 4")
    first = work.first()
    assert sorted(i for s in shards for i in s.indices) == list(range(len(work.requests)))
    for k, shard in enumerate(shards):
        assert [s.session_id for s in shard.sessions.sessions] == [s.session_id for s in work.sessions[k::4]]
        assert shard.indices[:len(work.sessions[k].calls)] == tuple(range(first[k], first[k + 1]))
        assert [r.request_id for r in shard.samples] == [work.requests[i].request_id for i in shard.indices]
    assert [s.max_concurrency for s in shards] == [1, 1, 1, 1]
    with pytest.raises(Exception, match="^--workers 7: only 6 sessions to share between 7 \\(a session stays on one\\)$"):
        split_sessions(bench_config(spec, "mock"), work, 7, "--workers 7")
    lost = merged(work, [], 4).per_session()  # no shard reported
    assert [(s["sent"], s["cut"]) for s in lost] == [(0, True)] * 6
