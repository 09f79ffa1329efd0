"""The mock answers a chat request that carries tools with a tool call, streamed as vLLM
streams ``tool_calls`` deltas, and the client reads it back as one call (client/openai.py)."""

import json

from mock_rawhttp import request

from servelab.client import openai
from servelab.client.sse import Event

TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]


def _chat(messages, max_tokens=4, **kw):
    return {"model": "mock", "messages": messages, "max_tokens": max_tokens, "stream": True, "tools": TOOLS,
            "stream_options": {"include_usage": True}, **kw}


def _read(r) -> openai.Stream:
    return openai.interpret("chat", [Event(i, e) for i, e in enumerate(r.events)])


USER = [{"role": "user", "content": "fix it"}]
AFTER_TOOL = [*USER, {"role": "assistant", "content": None, "tool_calls": [
    {"id": "x", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "x", "content": "one two three"}]


def test_a_users_turn_gets_a_tool_call_streamed_as_vllm_does_and_read_back_whole(mock_server):
    mock = mock_server(eos_len=4)
    r = request(mock.port, "POST", "/v1/chat/completions", _chat(USER, 8), {"X-Request-Id": "t1"})
    chunks = r.json_events()
    deltas = [c["choices"][0]["delta"] for c in chunks[1:-1]]
    assert deltas[0] == {"tool_calls": [{"index": 0, "id": "chatcmpl-tool-t1", "type": "function",
                                         "function": {"name": "read_file"}}]}
    assert all(set(d["tool_calls"][0]) == {"index", "function"} for d in deltas[1:])
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    stream = _read(r)
    assert len(stream.token_ns) == 4 and stream.answer == "" and stream.finish_reason == "tool_calls"
    (call,) = stream.tool_calls
    assert call["id"] == "chatcmpl-tool-t1" and call["function"]["name"] == "read_file"
    assert json.loads(call["function"]["arguments"]) == {"path": "quick brown fox"}
    assert mock.truth().by_id()["t1"].tool_call_id == "chatcmpl-tool-t1"


def test_after_the_tools_result_the_reply_is_text_and_required_always_calls(mock_server):
    mock = mock_server()
    text = _read(request(mock.port, "POST", "/v1/chat/completions", _chat(AFTER_TOOL), {"X-Request-Id": "t2"}))
    assert text.tool_calls == () and text.answer and text.finish_reason == "length"
    forced = request(mock.port, "POST", "/v1/chat/completions", _chat(AFTER_TOOL, tool_choice="required"),
                     {"X-Request-Id": "t3"})
    stream = _read(forced)  # it runs to max_tokens: the arguments are cut short, finish "length"
    assert stream.finish_reason == "length" and stream.tool_calls[0]["function"]["arguments"] == '{"path": "quick brown fox'
    none = _read(request(mock.port, "POST", "/v1/chat/completions", _chat(USER, tool_choice="none")))
    assert none.tool_calls == ()
    truth = mock.truth().by_id()
    assert truth["t2"].tool_call_id is None and truth["t3"].tool_call_id == "chatcmpl-tool-t3"


def test_never_and_a_request_without_tools_get_text(mock_server):
    mock = mock_server(tool_calls="never")
    assert _read(request(mock.port, "POST", "/v1/chat/completions", _chat(USER))).tool_calls == ()
    always = mock_server(tool_calls="always")
    assert _read(request(always.port, "POST", "/v1/chat/completions", _chat(AFTER_TOOL))).tool_calls
    body = {k: v for k, v in _chat(USER).items() if k != "tools"}
    assert _read(request(always.port, "POST", "/v1/chat/completions", body)).tool_calls == ()
