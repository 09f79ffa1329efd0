import json

from servelab.client import openai
from servelab.client.sse import Event


def ev(t, obj):
    return Event(t, obj if isinstance(obj, str) else json.dumps(obj))


def test_completions_body_matches_vllm_fields():
    body = json.loads(openai.request_body("completions", "m", "hi", 16, True, {"temperature": 0}))
    assert body == {"model": "m", "stream": True, "stream_options": {"include_usage": True},
                    "prompt": "hi", "repetition_penalty": 1.0, "max_tokens": 16, "logprobs": None,
                    "ignore_eos": True, "temperature": 0}


def test_completions_body_carries_logprobs_and_sampling_overrides_repetition_penalty():
    body = json.loads(openai.request_body("completions", "m", "hi", 4, False, {"repetition_penalty": 1.3}, logprobs=2))
    assert body["logprobs"] == 2 and body["repetition_penalty"] == 1.3


def test_chat_body_uses_messages_and_max_completion_tokens():
    body = json.loads(openai.request_body("chat", "m", "hi", 8, False))
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]  # vLLM's parts
    assert body["max_completion_tokens"] == 8 and "ignore_eos" not in body and "logprobs" not in body


def test_chat_role_only_delta_is_not_a_token():
    events = [
        ev(1, {"choices": [{"delta": {"role": "assistant", "content": ""}}]}),
        ev(2, {"choices": [{"delta": {"content": "Hi"}}]}),
        ev(3, {"choices": [{"delta": {"reasoning_content": "hmm"}, "finish_reason": "length"}]}),
        ev(4, {"choices": [], "usage": {"completion_tokens": 2, "prompt_tokens": 5}}),
        ev(5, "[DONE]"),
    ]
    s = openai.interpret("chat", events)
    assert s.token_ns == (2, 3) and s.texts == ("Hi", "hmm")
    assert s.completion_tokens == 2 and s.prompt_tokens == 5 and s.finished and s.error is None


def test_completions_empty_text_event_counts_usage_chunk_does_not():
    events = [ev(1, {"choices": [{"text": ""}]}), ev(2, {"choices": [{"text": "a"}]}),
              ev(3, {"choices": [], "usage": {"completion_tokens": 2}})]
    s = openai.interpret("completions", events)
    assert s.token_ns == (1, 2) and s.completion_tokens == 2 and not s.finished


def test_malformed_json_and_server_error_are_reported():
    assert "malformed JSON" in openai.interpret("completions", [Event(1, "{oops")]).error
    err = openai.interpret("completions", [ev(1, {"error": {"message": "boom"}})]).error
    assert err == "server error in stream: boom"


def test_http_error_line_names_status_and_message():
    line = openai.http_error(400, "Bad Request", b'{"error": {"message": "max_tokens too large"}}')
    assert line == "HTTP 400 Bad Request: max_tokens too large"


def test_reasoning_and_answer_first_events_and_the_answer_text_alone():
    events = [
        ev(1, {"choices": [{"delta": {"role": "assistant", "content": ""}}]}),
        ev(2, {"choices": [{"delta": {"reasoning": "let me"}}]}),  # vLLM 0.32's field
        ev(3, {"choices": [{"delta": {"reasoning_content": " think"}}]}),  # older vLLM, DeepSeek
        ev(4, {"choices": [{"delta": {"content": "Paris"}}]}),
        ev(5, {"choices": [{"delta": {"content": "."}, "finish_reason": "stop"}]}),
    ]
    s = openai.interpret("chat", events)
    assert (s.first_reasoning_ns, s.first_answer_ns) == (2, 4) and s.token_ns == (2, 3, 4, 5)
    assert s.answer == "Paris." and "".join(s.texts) == "let me thinkParis."


def test_no_reasoning_leaves_its_time_unset():
    s = openai.interpret("chat", [ev(7, {"choices": [{"delta": {"content": "hi"}}]})])
    assert (s.first_reasoning_ns, s.first_answer_ns, s.answer) == (0, 7, "hi")


def test_messages_body_is_the_chat_body_with_the_whole_conversation():
    messages = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                {"role": "user", "content": "c"}]
    body = json.loads(openai.messages_body("m", messages, 8, True, {"temperature": 0}))
    plain = json.loads(openai.request_body("chat", "m", "c", 8, True, {"temperature": 0}))
    assert body == {**plain, "messages": messages}


def test_tool_call_deltas_are_output_joined_by_index_and_a_bad_shape_is_one_line():
    events = [
        ev(1, {"choices": [{"delta": {"role": "assistant", "content": ""}}]}),
        ev(2, {"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c0", "type": "function",
                                                     "function": {"name": "read_file"}}]}}]}),
        ev(3, {"choices": [{"delta": {"tool_calls": [{"index": 1, "id": "c1", "function": {"name": "ls"}},
                                                    {"index": 0, "function": {"arguments": '{"path": '}}]}}]}),
        ev(4, {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": '"a"}'}}]},
                            "finish_reason": "tool_calls"}]}),
        ev(5, "[DONE]"),
    ]
    s = openai.interpret("chat", events)
    assert s.token_ns == (2, 3, 4) and s.answer == "" and s.finish_reason == "tool_calls"
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in s.tool_calls] == [
        ("c0", "read_file", '{"path": "a"}'), ("c1", "ls", "")]
    bad = openai.interpret("chat", [ev(1, {"choices": [{"delta": {"tool_calls": "x"}}]})])
    assert bad.error == "unreadable event in stream: 'delta.tool_calls' is not a list of objects: 'x'"
