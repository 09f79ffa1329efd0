import os

import pytest

from servelab.errors import ServerError
from servelab.mock.truth import RequestTruth, Truth
from servelab.selftest.fidelity import Seen, compare, open_mean, steady_window

MS = 1_000_000


def req(rid, recv, events, wire=None):
    return RequestTruth(request_id=rid, endpoint="completions", stream=True, recv_ns=recv, admit_ns=recv,
                        end_ns=events[-1], event_ns=tuple(events), event_tokens=(1,) * len(events),
                        finish="ok", finish_reason="length", prompt_tokens=1, planned_tokens=len(events),
                        output_tokens=len(events), wire_ns=wire)


def truth(reqs, open_t=(0,), open_n=(0,)):
    return Truth(config={}, start_ns=0, requests=tuple(reqs), open_t_ns=tuple(open_t), open_n=tuple(open_n))


def test_open_mean_is_time_weighted_over_the_window():
    t = truth([], open_t=(0, 10, 30), open_n=(0, 2, 4))
    # over [10, 40]: 2 open for 20 ns, 4 open for 10 ns
    assert open_mean(t, 10, 40) == pytest.approx((2 * 20 + 4 * 10) / 30)


def test_steady_window_from_cth_arrival_to_last_arrival():
    t = truth([req("a", 5, [9]), req("b", 1, [9]), req("c", 8, [9])])
    assert steady_window(t, 2) == (5, 8)


def test_errors_are_client_statistic_minus_truth_statistic():
    t = truth([req("a", 0, [50 * MS, 60 * MS]), req("b", 0, [40 * MS, 50 * MS])])
    client = {"a": Seen(51.0, [10.5]), "b": Seen(41.0, [9.5]), "unknown": Seen(1.0, [])}
    f = compare(client, t, concurrency=2)
    assert f.matched == 2
    assert f.ttft_mean_err_ms == pytest.approx(1.0)
    assert f.itl_mean_err_ms == pytest.approx(0.0)
    assert f.ttft_p99_err_ms == pytest.approx(1.0)


def test_ttft_error_splits_into_request_and_event_delivery():
    t = truth([req("a", 1 * MS, [51 * MS, 61 * MS])])
    # sent at 0, received at 1 ms; written at 51/61 ms, arrived at 51.5/61.5 ms
    client = {"a": Seen(51.5, [10.0], sent_ns=0, token_ns=(51_500_000, 61_500_000))}
    f = compare(client, t, concurrency=1)
    assert f.ttft_mean_err_ms == pytest.approx(1.5)
    assert f.request_delivery_mean_ms == pytest.approx(1.0) and f.event_delivery_mean_ms == pytest.approx(0.5)


def test_the_mocks_late_read_is_part_of_the_truth_not_the_clients_error():
    # sent at 0, at the mock's socket at 0.1 ms, read by the busy mock at 3.1 ms, first write at 53.1 ms
    t = truth([req("a", 3_100_000, [53_100_000, 63_100_000], wire=100_000)])
    client = {"a": Seen(53.3, [10.0], sent_ns=0, token_ns=(53_300_000, 63_300_000))}
    f = compare(client, t, concurrency=1)
    assert t.requests[0].ttft_ns == 53 * MS  # from arrival, not from the read
    assert f.ttft_mean_err_ms == pytest.approx(0.3)
    assert f.request_delivery_mean_ms == pytest.approx(0.1) and f.event_delivery_mean_ms == pytest.approx(0.2)
    assert f.mock_read_delay_mean_ms == pytest.approx(3.0)


def test_steady_window_counts_arrivals_at_the_socket():
    t = truth([req("a", 9, [20], wire=2), req("b", 10, [20], wire=4), req("c", 12, [20])])
    assert steady_window(t, 2) == (4, 12)


def test_no_request_on_both_sides_is_an_error_not_a_perfect_score():
    t = truth([req("a", 0, [50 * MS, 60 * MS])])
    with pytest.raises(ServerError, match="no request matched"):
        compare({"other": Seen(51.0, [10.0])}, t, concurrency=1)


def test_selftest_that_matched_nothing_fails_in_one_line(monkeypatch, capsys):
    from servelab.cli.main import main
    from servelab.selftest import run as selftest_run

    monkeypatch.setattr(selftest_run, "client_view", lambda records: {})  # ids that match nothing
    rc = main(["selftest", "--concurrency", "2", "--num-prompts", "2", "--output-len", "2", "--skip-ceiling"])
    captured = capsys.readouterr()
    assert rc == 2 and "+0.000" not in captured.out
    assert captured.err.strip().count("\n") == 0 and "no request matched" in captured.err


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs 2 usable CPUs (the selftest pins the client only then)")
def test_selftest_run_in_process_gives_the_caller_its_cpus_back(capsys):
    # It pins the client to its own core; left pinned, every later test (and the demo's engine
    # start in the same process) saw one core.
    from servelab.cli.main import main

    before = os.sched_getaffinity(0)
    assert main(["selftest", "--concurrency", "2", "--num-prompts", "2", "--output-len", "2", "--skip-ceiling"]) == 0
    assert os.sched_getaffinity(0) == before


def test_no_more_requests_than_streams_has_no_steady_window_and_no_nan():
    # both requests open at once: the window from the 2nd arrival to the last is empty
    t = truth([req("a", 0, [50 * MS]), req("b", 1, [50 * MS])], open_t=(0, 1), open_n=(1, 2))
    f = compare({"a": Seen(50.0, []), "b": Seen(49.0, [])}, t, concurrency=2)
    assert f.server_open_mean is None


def test_selftest_shows_the_streams_that_ran_and_no_nan(capsys):
    # 3 requests at --concurrency 512 (the default) open 3 streams, not 512
    from servelab.cli.main import main

    assert main(["selftest", "--num-prompts", "3", "--output-len", "2", "--skip-ceiling"]) == 0
    out = capsys.readouterr().out
    assert "fidelity: 3 streams, TTFT 50.0 ms, ITL 10.0 ms, 2 tokens, 3 requests matched to the truth\n" in out
    assert "  open at the server (mean)                        n/a  (all 3 requests were sent at once: none to " \
           "replace)\n" in out
    assert "nan" not in out and "512" not in out
