"""Pure truth arithmetic on hand-built records: exact integers."""

import json

import pytest

from servelab.mock.truth import RequestLog, RequestTruth, Truth, TruthLog, lateness_ns, mean_open, summarize


def _req(rid="r", recv=100, admit=100, events=(150, 160, 175), tokens=None, finish="ok", stream=True):
    tokens = tokens or (1,) * len(events)
    return RequestTruth(rid, "completions", stream, recv, admit, events[-1] if events else None,
                        tuple(events), tuple(tokens), finish, "length", 3, sum(tokens), sum(tokens))


def _truth(reqs=(), t=(0,), n=(0,)):
    return Truth({}, 0, tuple(reqs), tuple(t), tuple(n))


def test_ttft_and_itl():
    r = _req()
    assert r.ttft_ns == 50
    assert r.itl_ns == (10, 15)
    assert _req(events=()).ttft_ns is None


def test_lateness_against_absolute_schedule():
    # ttft 0.00005 ms = 50 ns, itl 10 ns: due 150, 160, 170
    assert lateness_ns(_req(), 0.00005, 0.00001) == (0, 0, 5)
    assert lateness_ns(_req(stream=False), 0.00005, 0.00001) == ()


def test_mean_open_is_time_weighted():
    # 0 until 10, 2 until 30, 1 until 40, then 0
    truth = _truth(t=(0, 10, 30, 40), n=(0, 2, 1, 0))
    assert mean_open(truth, 0, 40) == (2 * 20 + 1 * 10) / 40
    assert mean_open(truth, 10, 30) == 2
    assert mean_open(truth, 20, 35) == (2 * 10 + 1 * 5) / 15
    assert mean_open(truth, 40, 100) == 0
    with pytest.raises(ValueError):
        mean_open(truth, 5, 5)


def test_summarize_pools_ok_requests_only():
    truth = _truth([_req("a"), _req("b", events=(300, 305)), _req("c", finish="abort", events=(10, 20))])
    s = summarize(truth)
    assert s.ttft_ns == {"a": 50, "b": 200}
    assert s.itl_ns == (10, 15, 5)
    assert s.output_tokens == {"a": 3, "b": 2}
    assert s.finishes == {"ok": 2, "abort": 1}
    assert s.events == 7


def test_truth_log_edges_and_json_roundtrip():
    rec = TruthLog({"ttft_ms": 1.0})
    a, b = RequestLog("a", "chat", True, rec.start_ns + 5), RequestLog("b", "chat", False, rec.start_ns + 6)
    rec.begin(a)
    rec.begin(b)
    a.event_ns += [rec.start_ns + 7, rec.start_ns + 9]
    a.event_tokens += [2, 1]
    rec.end(a, rec.start_ns + 9, "ok")
    rec.end(a, rec.start_ns + 99, "abort")  # a second end is ignored
    assert rec.open_n == [0, 1, 2, 1]
    d = json.loads(json.dumps(rec.to_dict()))
    assert d["requests"][0]["output_tokens"] == 3 and d["requests"][0]["finish"] == "ok"
    truth = Truth.from_dict(d)
    assert truth.requests[0].event_tokens == (2, 1)
    assert truth.to_dict() == d
