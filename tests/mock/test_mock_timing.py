"""The schedule the truth records: TTFT, ITL, never early, open-stream gauges."""

import asyncio
import sys
import threading
import time

import pytest
from mock_rawhttp import Conn, metric, request

from servelab.mock import lateness_ns, mean_open, schedule

MS = 1_000_000


def _stream(port, max_tokens, rid=None):
    headers = {"X-Request-Id": rid} if rid else None
    body = {"prompt": "a", "max_tokens": max_tokens, "stream": True}
    return request(port, "POST", "/v1/completions", body, headers)


@pytest.fixture(params=["best", "loop"])
def alarm(request, monkeypatch):
    """The timerfd alarm where the platform has it, and the portable loop-timer one."""
    if request.param == "loop":
        monkeypatch.setattr(schedule, "make_alarm", schedule.LoopAlarm)
    return request.param


def test_truth_follows_the_schedule(start_mock, alarm):
    mock = start_mock(ttft_ms=80, itl_ms=15)
    t_send = time.perf_counter_ns()
    r = _stream(mock.port, 8, rid="timed")
    t_done = time.perf_counter_ns()
    assert len(r.json_events()) == 8
    req = mock.truth().by_id()["timed"]
    assert t_send <= req.recv_ns <= req.event_ns[0] <= req.event_ns[-1] <= req.end_ns <= t_done
    if sys.platform == "linux":  # the kernel stamped its arrival; the true TTFT counts from there
        assert t_send <= req.wire_ns <= req.recv_ns and req.ttft_ns == req.event_ns[0] - req.wire_ns
    assert 80 * MS <= req.ttft_ns <= 80 * MS + 20 * MS
    assert all(5 * MS <= g <= 25 * MS for g in req.itl_ns)
    # absolute schedule: the last event is due at 80 + 7·15 = 185 ms, late only by jitter
    assert 185 * MS <= req.event_ns[-1] - req.recv_ns <= 185 * MS + 20 * MS
    late = sorted(lateness_ns(req, 80, 15))
    assert late[0] >= 0  # never written before its due time
    assert late[len(late) // 2] <= 5 * MS
    assert req.finish == "ok" and req.output_tokens == 8


@pytest.mark.skipif(sys.platform != "linux", reason="timerfd is Linux-only")
def test_linux_alarm_is_a_timerfd():
    loop = asyncio.new_event_loop()
    alarm = schedule.make_alarm(loop, lambda: None)
    try:
        assert isinstance(alarm, schedule.TimerFdAlarm)
    finally:
        alarm.close()
        loop.close()


def test_non_streamed_response_comes_when_the_last_token_would(start_mock):
    mock = start_mock(ttft_ms=30, itl_ms=10)
    request(mock.port, "POST", "/v1/completions", {"prompt": "a", "max_tokens": 5})
    (req,) = mock.truth().requests
    assert req.event_tokens == (5,)
    assert 70 * MS <= req.event_ns[0] - req.recv_ns <= 90 * MS  # 30 + 4·10


def _background_streams(port, n, max_tokens):
    threads = [threading.Thread(target=_stream, args=(port, max_tokens)) for _ in range(n)]
    for t in threads:
        t.start()
    return threads


def _gauges(port):
    text = request(port, "GET", "/metrics").body.decode()
    return metric(text, "vllm:num_requests_running"), metric(text, "vllm:num_requests_waiting")


def _wait_for(port, want, timeout=5.0):
    end = time.monotonic() + timeout
    while (got := _gauges(port)) != want:
        assert time.monotonic() < end, f"gauges {got}, wanted {want}"
        time.sleep(0.01)


def test_running_gauge_counts_open_streams(start_mock):
    mock = start_mock(ttft_ms=300, itl_ms=10)
    threads = _background_streams(mock.port, 3, 2)
    _wait_for(mock.port, (3, 0))
    for t in threads:
        t.join()
    assert _gauges(mock.port) == (0, 0)


def test_max_open_makes_requests_wait(start_mock):
    mock = start_mock(ttft_ms=100, itl_ms=10, max_open=1)
    threads = _background_streams(mock.port, 3, 2)
    _wait_for(mock.port, (1, 2))
    for t in threads:
        t.join()
    truth = mock.truth()
    starts = sorted(r.admit_ns for r in truth.requests)
    ends = sorted(r.end_ns for r in truth.requests)
    # FCFS, one at a time: each starts when the previous ended
    assert starts[1] >= ends[0] and starts[2] >= ends[1]
    assert max(r.ttft_ns for r in truth.requests) >= 200 * MS  # the third waited for two


def test_open_edges_give_mean_concurrency(start_mock):
    mock = start_mock(ttft_ms=200)
    threads = _background_streams(mock.port, 4, 1)
    for t in threads:
        t.join()
    truth = mock.truth()
    first = min(r.recv_ns for r in truth.requests)
    last = max(r.end_ns for r in truth.requests)
    assert max(truth.open_n) == 4 and truth.open_n[-1] == 0
    # all four overlap for ~200 ms of the ~200 ms window
    assert 3.0 <= mean_open(truth, first, last) <= 4.0


def test_zero_delay_streams_everything_in_batches(start_mock):
    mock = start_mock()
    conn = Conn(mock.port)
    r = conn.request("POST", "/v1/completions", {"prompt": "a", "max_tokens": 1000, "stream": True,
                                                 "stream_options": {"include_usage": True}})
    conn.close()
    chunks = r.json_events()
    assert len(chunks) == 1001 and chunks[-1]["usage"]["completion_tokens"] == 1000
    (req,) = mock.truth().requests
    assert len(req.event_ns) == 1000 and req.output_tokens == 1000
    assert len(set(req.event_ns)) < 1000  # several events per write


def test_truth_reset_keeps_open_count(start_mock):
    mock = start_mock()
    _stream(mock.port, 2)
    mock.reset_truth()
    assert mock.truth().requests == ()
    _stream(mock.port, 1)
    truth = mock.truth()
    assert len(truth.requests) == 1 and truth.open_n == (0, 1, 0)
    assert request(mock.port, "POST", "/_servelab/truth/reset").status == 200
    assert request(mock.port, "GET", "/_servelab/truth").json()["requests"] == []
