"""datasets/agentic_chat.py: a call's chat messages from its blocks and its agent's replies."""

from __future__ import annotations

import json

import numpy as np

from servelab.datasets.agentic import Call, Session
from servelab.datasets.agentic_chat import DEFAULT_ARGUMENTS, chain, messages, reply, scripted, separated, \
    tool_result_len
from servelab.datasets.agentic_synth import Shape, synthesize
from servelab.datasets.weka import read_weka


def test_the_first_token_of_every_block_becomes_the_separator_and_the_length_is_kept():
    assert separated(list(range(10)), 4, 99) == [99, 1, 2, 3, 99, 5, 6, 7, 99, 9]
    assert separated(list(range(3)), 4, None) == [0, 1, 2]


# main: 0 -> 1 (tool turn) -> 3 (a shorter context: compacted); 2 is a sub-agent spawned by 0
SESSION = Session("s", 4, (Call("", (1,), 6, 2), Call("", (1, 2), 12, 2, (0,), 0.5, tool_result=True),
                           Call("x", (1,), 5, 1, (0,)), Call("", (1,), 7, 1, (1, 2), 0.1)))


def test_a_calls_chain_is_its_agents_calls_before_it_cut_where_the_context_shrank():
    assert [chain(SESSION, k) for k in range(4)] == [[], [0], [], []]
    assert scripted(SESSION) == [True, False, False, False]
    assert [tool_result_len(SESSION, k) for k in range(4)] == [0, 12 - 6 - 2, 0, 0]


def test_a_tool_turn_carries_the_call_and_a_result_per_call_that_share_the_stated_tokens():
    said, source = reply("", ({"id": "a", "type": "function", "function": {"name": "read_file", "arguments": "{}"}},
                              {"id": None, "type": "function", "function": {"name": None, "arguments": '{"pa'}}),
                         "call-r")
    assert source == "server" and said["content"] is None
    assert [c["id"] for c in said["tool_calls"]] == ["a", "call-r-1"]  # an id the server left out: ours
    assert said["tool_calls"][1]["function"] == {"name": "read_file", "arguments": DEFAULT_ARGUMENTS}  # cut short
    ids = list(range(12))
    msgs = messages(SESSION, 1, ids, {0: said}, lambda part: " ".join(map(str, part)))
    assert msgs == [{"role": "user", "content": "0 1 2 3 4 5"}, said,
                    {"role": "tool", "tool_call_id": "a", "content": "8 9"},
                    {"role": "tool", "tool_call_id": "call-r-1", "content": "10 11"}]
    text, source = reply("done", (), None)
    assert source is None and text == {"role": "assistant", "content": "done"}
    script, source = reply("ok", (), "call-r")
    assert source == "script" and json.loads(script["tool_calls"][0]["function"]["arguments"]) == {"path": "src/main.py"}


def test_weka_marks_tool_turns_from_stop_and_input_types_and_synthetic_sessions_from_their_tool_results(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps({"id": "a", "block_size": 4, "requests": [
        {"in": 4, "out": 1, "stop": "tool_use"}, {"in": 8, "out": 1}, {"in": 12, "out": 1, "input_types": ["tool_result"]},
        {"in": 14, "out": 1, "stop": "end_turn"}, {"in": 16, "out": 1}]}) + "\n")
    (s,) = read_weka(str(trace))
    assert [c.tool_result for c in s.calls] == [False, True, True, False, False]
    for s in synthesize(3, Shape(fan_out_p=1.0), np.random.default_rng(1)):
        firsts = {c.agent: k for k, c in reversed(list(enumerate(s.calls)))}
        assert [c.tool_result for c in s.calls] == [k != firsts[c.agent] for k, c in enumerate(s.calls)]
