"""Wire shapes of the mock: vLLM's SSE events, chunked framing, keep-alive, endpoints."""

import pytest
from mock_rawhttp import Conn, metric, request

from servelab.mock.dialect import WORDS


def _completion(max_tokens=4, **kw):
    return {"model": "mock", "prompt": "one two three", "max_tokens": max_tokens, "stream": True, **kw}


def _chat(max_tokens=4, **kw):
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"}]
    return {"model": "mock", "messages": msgs, "max_tokens": max_tokens, "stream": True, **kw}


def test_completions_stream_shape(mock_server):
    mock = mock_server(model="m1")
    r = request(mock.port, "POST", "/v1/completions", _completion(3), {"X-Request-Id": "abc"})
    assert r.status == 200 and r.complete
    assert r.headers["content-type"].startswith("text/event-stream")
    assert r.headers["transfer-encoding"] == "chunked"
    assert r.headers["x-request-id"] == "abc"
    assert r.events[-1] == "[DONE]"
    chunks = r.json_events()
    assert len(chunks) == 3  # one per token, no usage chunk unless asked
    for c in chunks:
        assert c["id"] == "cmpl-abc" and c["object"] == "text_completion" and c["model"] == "m1"
        assert "usage" not in c
    assert [c["choices"][0]["text"] for c in chunks] == list(WORDS[:3])
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None, None, "length"]
    assert chunks[0]["choices"][0] == {
        "index": 0, "text": WORDS[0], "logprobs": None, "finish_reason": None,
        "stop_reason": None, "prompt_token_ids": None, "token_ids": None,
    }


def test_completions_usage_chunk_when_asked(mock_server):
    mock = mock_server()
    body = _completion(5, stream_options={"include_usage": True})
    chunks = request(mock.port, "POST", "/v1/completions", body).json_events()
    assert len(chunks) == 6
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"


def test_chat_stream_role_chunk_then_content(mock_server):
    mock = mock_server()
    r = request(mock.port, "POST", "/v1/chat/completions", _chat(4, stream_options={"include_usage": True}))
    chunks = r.json_events()
    assert r.events[-1] == "[DONE]"
    role, content, usage = chunks[0], chunks[1:-1], chunks[-1]
    assert role["object"] == "chat.completion.chunk"
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [c["choices"][0]["delta"] for c in content] == [{"content": w} for w in WORDS[:4]]
    assert content[-1]["choices"][0]["finish_reason"] == "length"
    assert all(c["id"] == role["id"] and c["id"].startswith("chatcmpl-") for c in chunks)
    # prompt tokens: words of every message (2 + 2)
    assert usage == {"id": role["id"], "object": "chat.completion.chunk", "created": role["created"],
                     "model": "mock", "choices": [],
                     "usage": {"prompt_tokens": 4, "completion_tokens": 4, "total_tokens": 8}}


@pytest.mark.parametrize("itl_ms", [0.0, 2.0])
def test_chat_role_chunk_comes_first_when_paced(mock_server, itl_ms):
    # Paced events take a one-event fast path; the role chunk must still lead.
    mock = mock_server(itl_ms=itl_ms)
    chunks = request(mock.port, "POST", "/v1/chat/completions", _chat(4)).json_events()
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert deltas == [{"role": "assistant", "content": ""}] + [{"content": w} for w in WORDS[:4]]


def test_chat_no_usage_unless_asked(mock_server):
    mock = mock_server()
    chunks = request(mock.port, "POST", "/v1/chat/completions", _chat(2)).json_events()
    assert len(chunks) == 3 and all(c["choices"] for c in chunks)


def test_max_completion_tokens_and_tokens_per_event(mock_server):
    mock = mock_server(tokens_per_event=3)
    body = _chat(None, max_completion_tokens=7)
    chunks = request(mock.port, "POST", "/v1/chat/completions", body).json_events()[1:]
    texts = [c["choices"][0]["delta"]["content"] for c in chunks]
    assert texts == ["".join(WORDS[0:3]), "".join(WORDS[3:6]), WORDS[6]]
    assert [r.event_tokens for r in mock.truth().requests] == [(3, 3, 1)]


def test_output_len_override_and_eos(mock_server):
    mock = mock_server(output_len=6, eos_len=4)
    stop = request(mock.port, "POST", "/v1/completions", _completion(100)).json_events()
    full = request(mock.port, "POST", "/v1/completions", _completion(100, ignore_eos=True)).json_events()
    assert len(stop) == 4 and stop[-1]["choices"][0]["finish_reason"] == "stop"
    assert len(full) == 6 and full[-1]["choices"][0]["finish_reason"] == "length"
    assert [r.finish_reason for r in mock.truth().requests] == ["stop", "length"]


def test_output_len_range_draws_within_bounds(mock_server):
    mock = mock_server(output_len=(2, 5), seed=3)
    lens = [len(request(mock.port, "POST", "/v1/completions", _completion(100)).json_events())
            for _ in range(20)]
    assert set(lens) <= {2, 3, 4, 5} and len(set(lens)) > 1


def test_keep_alive_serves_two_requests_on_one_connection(mock_server):
    mock = mock_server()
    conn = Conn(mock.port)
    first = conn.request("POST", "/v1/completions", _completion(2))
    second = conn.request("POST", "/v1/chat/completions", _chat(2))
    third = conn.request("GET", "/health")
    conn.close()
    assert first.complete and second.complete and third.status == 200
    assert len(first.json_events()) == 2 and len(second.json_events()) == 3


def test_pipelined_requests_wait_for_the_stream(mock_server):
    mock = mock_server(itl_ms=2)
    conn = Conn(mock.port)
    conn.send("POST", "/v1/completions", _completion(5))
    conn.send("POST", "/v1/completions", _completion(2))
    a, b = conn.read(), conn.read()
    conn.close()
    assert len(a.json_events()) == 5 and len(b.json_events()) == 2


def test_close_after_response_closes_after_stream(mock_server):
    mock = mock_server(close_after_response=True)
    conn = Conn(mock.port)
    r = conn.request("POST", "/v1/completions", _completion(2))
    assert r.complete and len(r.json_events()) == 2
    assert conn.at_eof()
    conn.close()


def test_without_close_after_response_connection_stays(mock_server):
    mock = mock_server()
    conn = Conn(mock.port, timeout=0.3)
    conn.request("POST", "/v1/completions", _completion(2))
    with pytest.raises(TimeoutError):
        conn.at_eof()
    conn.close()


def test_connection_close_header_is_honoured(mock_server):
    mock = mock_server()
    conn = Conn(mock.port)
    r = conn.request("GET", "/health", headers={"Connection": "close"})
    assert r.status == 200 and r.headers["connection"] == "close" and conn.at_eof()
    conn.close()


def test_non_streaming_completion(mock_server):
    mock = mock_server()
    body = {"prompt": [1, 2, 3, 4, 5], "max_tokens": 3}  # token ids count exactly
    r = request(mock.port, "POST", "/v1/completions", body)
    data = r.json()
    assert r.status == 200 and r.headers["content-type"] == "application/json"
    assert data["object"] == "text_completion"
    assert data["choices"][0]["text"] == "".join(WORDS[:3])
    assert data["choices"][0]["finish_reason"] == "length"
    assert data["usage"] == {"prompt_tokens": 5, "total_tokens": 8, "completion_tokens": 3}


def test_request_id_from_body_when_no_header(mock_server):
    mock = mock_server()
    chunks = request(mock.port, "POST", "/v1/completions", _completion(1, request_id="body-id")).json_events()
    assert chunks[0]["id"] == "cmpl-body-id"
    assert [r.request_id for r in mock.truth().requests] == ["body-id"]


def test_non_streaming_chat(mock_server):
    mock = mock_server()
    data = request(mock.port, "POST", "/v1/chat/completions", {**_chat(2), "stream": False}).json()
    assert data["object"] == "chat.completion"
    assert data["choices"][0]["message"] == {"role": "assistant", "content": "".join(WORDS[:2])}
    assert data["usage"]["completion_tokens"] == 2


def test_models_health_reset_and_errors(mock_server):
    mock = mock_server(model="org/model-7b", max_model_len=4096)
    models = request(mock.port, "GET", "/v1/models").json()
    assert models["object"] == "list"
    card = models["data"][0]
    assert card["id"] == "org/model-7b" and card["object"] == "model" and card["max_model_len"] == 4096
    assert request(mock.port, "GET", "/health").status == 200
    assert request(mock.port, "POST", "/reset_prefix_cache").status == 200
    assert request(mock.port, "GET", "/nope").status == 404
    assert request(mock.port, "GET", "/v1/completions").status == 405
    bad = request(mock.port, "POST", "/v1/completions", b"{not json")
    assert bad.status == 400 and "error" in bad.json()
    for body in ({"prompt": "x", "max_tokens": 0}, {"prompt": "x", "stream_options": "yes"}, [1, 2]):
        assert request(mock.port, "POST", "/v1/completions", body).status == 400
    assert request(mock.port, "GET", "/health").status == 200  # and the server lives on


def test_metrics_counters(mock_server):
    mock = mock_server()
    request(mock.port, "POST", "/v1/completions", _completion(4))  # prompt: 3 words
    request(mock.port, "POST", "/v1/completions", {**_completion(2), "stream": False})
    r = request(mock.port, "GET", "/metrics")
    text = r.body.decode()
    assert r.headers["content-type"].startswith("text/plain")
    assert "# TYPE vllm:num_requests_running gauge" in text
    assert metric(text, "vllm:prompt_tokens_total") == 6
    assert metric(text, "vllm:generation_tokens_total") == 6
    assert metric(text, "vllm:num_requests_running") == 0
    assert 'vllm:request_success_total{engine="0",model_name="mock",finished_reason="length"} 2.0' in text
