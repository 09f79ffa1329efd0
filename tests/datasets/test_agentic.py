"""Agentic sessions: the WEKA reader (datasets/weka.py), block-exact prompts and scaling
(datasets/agentic.py), the synthetic generator (datasets/agentic_synth.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from servelab.config import DatasetSpec
from servelab.datasets.agentic import Blocks, Call, Session, describe, scale
from servelab.datasets.agentic_synth import Shape, synthesize
from servelab.datasets.sessions import read_sessions
from servelab.datasets.weka import read_weka
from servelab.errors import DatasetError

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "agentic_weka.jsonl"
VOCAB = list(range(1000, 3000))


def test_the_example_trace_reads_as_its_dag():
    fix, add = read_weka(str(EXAMPLE))
    assert (fix.session_id, fix.block_size) == ("fix-bug", 64)
    # call 0; two sub-agents spawned by it (explore1: two calls, explore2: one); the join waits for all
    assert [(c.agent, c.parents, c.wait_s) for c in fix.calls] == [
        ("", (), 0.0), ("explore1", (0,), 0.0), ("explore1", (1,), 0.2), ("explore2", (0,), 0.0),
        ("", (0, 2, 3), 0.3)]
    assert [(c.input_len, c.output_len, c.blocks) for c in fix.calls][4] == (300, 16, (1, 2, 3, 4))
    # a sub-agent after the parent's last request: it runs in the background, nothing joins it
    assert [(c.agent, c.parents) for c in add.calls] == [("", ()), ("", (0,)), ("lint", (1,))]
    assert describe([fix, add]) == {
        "sessions": 2, "calls": 8, "sub_agents": 3, "max_fan_out": 2, "tool_turns": 3, "blocks": 12, "block_size": [64],
        "input_tokens": 1260, "output_tokens": 92, "max_input_len": 300,
        "wait_s": {"total": 1.0, "max": 0.5, "median": 0.0}}


def write(tmp_path: Path, *conversations: dict) -> str:
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in conversations))
    return str(path)


def conv(*requests: dict, block_size: int = 64) -> dict:
    return {"id": "c", "block_size": block_size, "requests": list(requests)}


OK = {"t": 0, "in": 100, "out": 5, "hash_ids": [1]}


@pytest.mark.parametrize("bad, message", [
    ({"t": 0, "in": 100, "out": 5, "hash_ids": [1, 2, 3]},
     r":2: requests\[1\]\.hash_ids has 3 ids, more than ⌈in / block_size⌉ = ⌈100 / 64⌉ = 2$"),
    ({"t": -1.0, "in": 100, "out": 5}, r":2: requests\[1\]\.t is negative \(-1\.0 s\)$"),
    ({"t": 1, "in": 100, "out": 5, "think_time": -0.5}, r":2: requests\[1\]\.think_time is negative"),
    ({"t": 1, "in": "many", "out": 5}, r":2: requests\[1\]\.in must be an integer >= 0, not 'many'$"),
    ({"t": 1, "type": "x", "in": 1, "out": 1}, r":2: requests\[1\]\.type is 'x', not one of s, n, subagent$"),
    ({"t": 1, "type": "subagent", "requests": [{"t": 0, "in": 10, "out": 1, "hash_ids": [1, 2]}]},
     r":2: requests\[1\]\.requests\[0\]\.hash_ids has 2 ids, more than ⌈in / block_size⌉ = ⌈10 / 64⌉ = 1$"),
])
def test_bad_input_is_one_line_naming_the_file_the_line_and_the_field(tmp_path, bad, message):
    path = write(tmp_path, conv(OK), conv(OK, bad))
    with pytest.raises(DatasetError, match=message) as caught:
        read_weka(path)
    assert str(caught.value).startswith(f"{path}:2: ") and "\n" not in str(caught.value)


def test_a_sub_agent_with_no_parent_is_refused(tmp_path):
    path = write(tmp_path, conv({"t": 0, "type": "subagent", "requests": [OK]}, OK))
    with pytest.raises(DatasetError, match=r":1: requests\[0\] is a sub-agent with no parent"):
        read_weka(path)


def test_ceil_hash_ids_are_accepted_and_a_whole_file_object_reads_too(tmp_path):
    path = tmp_path / "one.json"
    path.write_text(json.dumps(conv({"t": 0, "in": 65, "out": 1, "hash_ids": [1, 2]}), indent=2))
    (session,) = read_weka(str(path))
    assert session.calls[0].blocks == (1, 2)


def test_blocks_sharing_an_id_share_tokens_and_a_short_last_block_is_its_full_blocks_prefix():
    s = Session("s", 4, (Call("", (1, 2), 8, 1), Call("", (1, 2, 3), 10, 1, (0,)), Call("", (1, 2, 3), 12, 1, (1,)),
                         Call("sub", (1,), 6, 1, (0,))))
    blocks = Blocks(VOCAB)
    a, b, c, d = (blocks.prompt(s, k) for k in range(4))
    assert (len(a), len(b), len(c), len(d)) == (8, 10, 12, 6)
    assert b[:8] == a and c[:10] == b  # block 3: 2 tokens in call 1, the prefix of its 4 in call 2
    assert d[:4] != a[:4]  # a sub-agent's id 1 is its own block (its own cache scope)
    assert blocks.prompt(s, 1) == b  # made the same every time
    assert all(t in VOCAB for t in a + b + c + d)


def test_new_tokens_differ_between_calls():
    s = Session("s", 4, (Call("", (1,), 8, 1), Call("", (1,), 8, 1, (0,))))
    blocks = Blocks(VOCAB)
    a, b = blocks.prompt(s, 0), blocks.prompt(s, 1)
    assert a[:4] == b[:4] and a[4:] != b[4:]


def test_trace_scale_shrinks_the_block_size_and_every_length_keeping_the_sharing():
    (s,) = scale([Session("s", 64, (Call("", (1, 2), 150, 20), Call("", (1, 2, 3), 200, 8, (0,))))], 0.25)
    assert s.block_size == 16
    # 2 full blocks of 16 and 22 × 0.25 new; 3 blocks and 8 × 0.25; outputs × 0.25 (at least 1)
    assert [(c.blocks, c.input_len, c.output_len) for c in s.calls] == [((1, 2), 38, 5), ((1, 2, 3), 50, 2)]


def test_read_sessions_says_the_trace_was_scaled_and_refuses_a_bad_scale():
    sessions, about = read_sessions(DatasetSpec(name="weka", path=str(EXAMPLE), trace_scale=0.5))
    assert about == {"trace": str(EXAMPLE), "trace_scale": 0.5, "scaled": True}
    assert sessions[0].block_size == 32 and sessions[0].calls[4].input_len == 150
    with pytest.raises(DatasetError, match="^--trace-scale must be > 0, not 0.0$"):
        read_sessions(DatasetSpec(name="weka", path=str(EXAMPLE), trace_scale=0.0))
    with pytest.raises(DatasetError, match="--dataset-path is required for --dataset-name weka"):
        read_sessions(DatasetSpec(name="weka"))


# --- the synthetic generator ---

def test_a_seed_names_the_synthetic_sessions():
    one = synthesize(5, Shape(), np.random.default_rng(7))
    assert one == synthesize(5, Shape(), np.random.default_rng(7))
    assert one != synthesize(5, Shape(), np.random.default_rng(8))


def test_synthetic_contexts_grow_and_each_call_resends_the_one_before():
    for s in synthesize(20, Shape(fan_out_p=0.0), np.random.default_rng(1)):
        assert {c.agent for c in s.calls} == {""}  # no fan-out asked: no sub-agent
        assert 3 <= len(s.calls) <= 8
        for before, after in zip(s.calls, s.calls[1:]):
            assert after.parents == (s.calls.index(before),)
            assert after.input_len >= before.input_len + before.output_len  # the reply and a tool result
            assert after.blocks[:len(before.blocks)] == before.blocks  # its full blocks shared
            assert after.wait_s >= 0
        assert all(len(c.blocks) == c.input_len // 64 for c in s.calls)


def test_synthetic_fan_out_starts_sub_agents_after_a_call_and_joins_them_at_the_next():
    shape = Shape(fan_out_p=1.0, fan_out=(2, 2), sub_turns=(2, 2))
    for s in synthesize(10, shape, np.random.default_rng(3)):
        main = [i for i, c in enumerate(s.calls) if c.agent == ""]
        subs = {c.agent for c in s.calls if c.agent}
        assert len(subs) == 2 * (len(main) - 1)  # two after every main call but the last
        for k, i in enumerate(main[1:]):
            joined = s.calls[i].parents
            assert joined[0] == main[k] and len(joined) == 3  # the call before, and both sub-agents' last
            for last in joined[1:]:
                first = s.calls[last].parents[0]
                assert s.calls[first].parents == (main[k],) and s.calls[last].agent == s.calls[first].agent
        assert describe([s])["max_fan_out"] == 2


def test_a_bad_shape_is_one_line():
    with pytest.raises(DatasetError, match=r"^agentic shape: turns must be a range 1 <= low <= high, not 3\.\.2$"):
        Shape(turns=(3, 2))


def test_agentic_shape_pairs_override_the_defaults_each_typed_and_a_bad_one_is_one_line():
    from servelab.datasets.agentic_synth import shape_from

    shape = shape_from((("turns", "2:5"), ("fan_out", "3"), ("fan_out_p", "1"), ("system_tokens", "64")))
    assert (shape.turns, shape.fan_out, shape.fan_out_p, shape.system_tokens) == ((2, 5), (3, 3), 1.0, 64)
    assert shape.output_tokens == Shape().output_tokens  # the rest keep their defaults
    with pytest.raises(DatasetError, match=r"^--agentic-shape: system_tokens='1\.5' is not an integer$"):
        shape_from((("system_tokens", "1.5"),))
    with pytest.raises(DatasetError, match=r"^--agentic-shape: unknown key 'foo' \(keys: turns, "):
        shape_from((("foo", "1"),))
    sessions, about = read_sessions(DatasetSpec(name="agentic", num_prompts=3, seed=2,
                                                agentic_shape=(("turns", "2:2"), ("fan_out_p", "0"))))
    assert [len(s.calls) for s in sessions] == [2, 2, 2] and about["synthetic"]["shape"]["turns"] == (2, 2)


def test_trace_max_wait_caps_each_wait_and_says_how_many():
    sessions, about = read_sessions(DatasetSpec(name="weka", path=str(EXAMPLE), trace_max_wait_s=0.25))
    assert [c.wait_s for s in sessions for c in s.calls] == [0.0, 0.0, 0.2, 0.0, 0.25, 0.0, 0.25, 0.0]
    assert (about["max_wait_s"], about["waits_capped"]) == (0.25, 2)
    assert "max_wait_s" not in read_sessions(DatasetSpec(name="weka", path=str(EXAMPLE)))[1]
