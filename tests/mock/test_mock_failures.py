"""Injected failures: how many, which, and what the client and the truth see."""

import time

import pytest
from mock_rawhttp import Conn, metric, request

from servelab.mock import MockConfig
from servelab.mock.plan import Planner

BODY = {"prompt": "a b", "max_tokens": 6, "stream": True}


def _statuses(port: int, n: int) -> list[int]:
    conn = Conn(port)  # one connection, so request k is the k-th parsed
    out = [conn.request("POST", "/v1/completions", BODY).status for _ in range(n)]
    conn.close()
    return out


def test_error_rate_with_seed_fails_an_exact_set(mock_server):
    mock = mock_server(error_rate=0.3, seed=11)
    statuses = _statuses(mock.port, 100)
    planner = Planner(MockConfig(error_rate=0.3, seed=11))
    expected = [500 if planner.next(6, False).failure else 200 for _ in range(100)]
    assert statuses == expected
    assert 15 <= statuses.count(500) <= 45  # a draw, not a constant: near 30 of 100
    finishes = [r.finish for r in mock.truth().requests]
    assert finishes.count("http500") == statuses.count(500)
    assert finishes.count("ok") == statuses.count(200)


def test_same_seed_same_failures_other_seed_differs(mock_server):
    a = _statuses(mock_server(error_rate=0.5, seed=1).port, 40)
    b = _statuses(mock_server(error_rate=0.5, seed=1).port, 40)
    c = _statuses(mock_server(error_rate=0.5, seed=2).port, 40)
    assert a == b and a != c


@pytest.mark.parametrize("rate,expect", [(0.0, 0), (1.0, 20)])
def test_error_rate_bounds(mock_server, rate, expect):
    assert _statuses(mock_server(error_rate=rate).port, 20).count(500) == expect


def test_http500_body_is_vllm_error(mock_server):
    mock = mock_server(error_rate=1.0)
    r = request(mock.port, "POST", "/v1/chat/completions", {"messages": [], "max_tokens": 3, "stream": True})
    assert r.status == 500
    err = r.json()["error"]
    assert err["code"] == 500 and err["type"] == "InternalServerError" and err["message"]


def test_pipelined_failures_keep_open_edges_in_order(mock_server):
    mock = mock_server(error_rate=1.0)
    conn = Conn(mock.port)
    for _ in range(3):
        conn.send("POST", "/v1/completions", BODY)
    assert [conn.read().status for _ in range(3)] == [500, 500, 500]
    conn.close()
    truth = mock.truth()
    assert truth.open_n == (0, 1, 0, 1, 0, 1, 0)
    assert list(truth.open_t_ns) == sorted(truth.open_t_ns)


def test_failure_kinds_are_mixed_by_the_seed():
    planner = Planner(MockConfig(error_rate=1.0, failure_kinds=("http500", "abort"), seed=5))
    kinds = {planner.next(4, False).failure for _ in range(50)}
    assert kinds == {"http500", "abort"}


def test_abort_closes_mid_stream(mock_server):
    mock = mock_server(error_rate=1.0, failure_kinds=("abort",))
    conn = Conn(mock.port)
    r = conn.request("POST", "/v1/completions", {**BODY, "max_tokens": 10})
    assert r.status == 200 and not r.complete
    assert len(r.events) == 5 and "[DONE]" not in r.events  # half, then EOF
    conn.close()
    (log,) = mock.truth().requests
    assert log.finish == "abort" and log.output_tokens == 5 and log.planned_tokens == 10


def test_stall_stops_mid_stream_and_keeps_running(mock_server):
    mock = mock_server(error_rate=1.0, failure_kinds=("stall",))
    conn = Conn(mock.port, timeout=0.5)
    conn.send("POST", "/v1/completions", {**BODY, "max_tokens": 8})
    with pytest.raises(TimeoutError):
        conn.read()  # status and 4 events arrive; the rest never does
    assert conn.partial.status == 200 and len(conn.partial.events) == 4
    text = request(mock.port, "GET", "/metrics").body.decode()
    assert metric(text, "vllm:num_requests_running") == 1
    assert mock.truth().requests[0].finish is None  # still open
    conn.close()
    _wait(lambda: mock.truth().requests[0].finish == "stall")
    (log,) = mock.truth().requests
    assert log.output_tokens == 4


def test_client_disconnect_mid_stream_is_recorded(mock_server):
    mock = mock_server(itl_ms=20)
    conn = Conn(mock.port)
    conn.send("POST", "/v1/completions", {**BODY, "max_tokens": 50})
    conn.file.readline()  # status line: the stream has started
    conn.close()
    _wait(lambda: mock.truth().requests[0].finish is not None)
    (log,) = mock.truth().requests
    assert log.finish == "disconnect" and log.output_tokens < 50
    assert metric(request(mock.port, "GET", "/metrics").body.decode(), "vllm:num_requests_running") == 0


def _wait(cond, timeout=5.0):
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)
