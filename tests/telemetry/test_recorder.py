"""The scraper process and the recorder, against the mock and against nothing."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from net_helpers import wait_until

from servelab.telemetry.recorder import Recorder, metrics_url


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


INTERVAL_S = 0.05
# The scraper runs at nice 10: on a machine whose cores are all busy it gets little CPU
# for as long as that takes. Tests wait for what it writes, not for a number of seconds.
PATIENCE_S = 60.0


def engine_lines(path: Path) -> int:
    try:
        return path.read_text().count('"src": "engine"')
    except OSError:
        return 0


def record(url: str, engine_samples: int = 3):
    """Record until the scraper has tried ``engine_samples`` scrapes inside the window.
    Returns the timeline, with our own clock read before the scraper started and after it stopped."""
    before = time.perf_counter_ns()
    with Recorder(url, interval_s=INTERVAL_S, gpu=False) as rec:
        rec.start()
        assert rec.wait_ready(PATIENCE_S)
        already = engine_lines(rec._dir / "scrape.jsonl")
        t0 = time.perf_counter_ns()
        assert wait_until(lambda: engine_lines(rec._dir / "scrape.jsonl") >= already + engine_samples, PATIENCE_S)
        timeline = rec.stop(t0, time.perf_counter_ns())
    return timeline, (before - t0) / 1e6, (time.perf_counter_ns() - t0) / 1e6


def test_scrapes_the_mock_on_the_client_clock(mock_server):
    mock = mock_server(max_open=2)
    timeline, started_ms, stopped_ms = record(metrics_url(mock.url + "/"))
    engine = timeline.during("engine")
    assert len(engine) >= 2  # of the 3 tried in the window, the one in flight at t0 may fall before it
    assert engine[0]["running"] == 0.0 and engine[0]["kv_usage"] == 0.0 and engine[0]["scrape_ms"] > 0
    assert timeline.header["engine"]["names"]["running"] == "vllm:num_requests_running"
    assert timeline.header["gpu"] == {"status": "absent", "detail": "disabled (--no-gpu)", "devices": []}
    assert timeline.header["metrics_url"] == mock.url + "/metrics"
    ts = [s["t_ms"] for s in timeline.samples if s["src"] == "engine"]
    # The same clock as ours: every sample lies between our readings before the scraper
    # started and after it stopped (another clock would put them days away).
    assert ts == sorted(ts) and started_ms <= ts[0] and ts[-1] <= stopped_ms
    # An absolute schedule that skips a slow tick and never bunches: no more samples than intervals.
    assert len(ts) <= 2 + (ts[-1] - ts[0]) / (INTERVAL_S * 1e3)


def test_ready_comes_after_a_first_sample_and_stopping_takes_a_closing_one(mock_server):
    """A run too short for any scrape inside still has a sample before t0 and after its end."""
    mock = mock_server(max_open=2)
    with Recorder(metrics_url(mock.url), interval_s=60.0, gpu=False) as rec:
        rec.start()
        assert rec.wait_ready(PATIENCE_S)
        assert engine_lines(rec._dir / "scrape.jsonl") == 1  # the baseline, written before "ready"
        t0 = time.perf_counter_ns()
        timeline = rec.stop(t0, t0)  # a run of no length: any sample after t0 is after its end
    ts = [s["t_ms"] for s in timeline.of("engine")]
    assert len(ts) == 2 and ts[0] < 0.0 < ts[1]
    assert timeline.during("engine") == []


def test_a_server_without_metrics_is_recorded_as_absent():
    timeline, _, _ = record(f"http://127.0.0.1:{closed_port()}/metrics")
    assert timeline.header["engine"]["status"] == "absent"
    assert timeline.header["engine"]["detail"].startswith("unreachable")
    assert timeline.of("engine") == [] and any("error" in s for s in timeline.samples)


def test_closing_stdin_stops_the_scraper_and_ctrl_c_does_not(tmp_path):
    out = tmp_path / "s.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "servelab.telemetry.scrape",
                             f"http://127.0.0.1:{closed_port()}/metrics", str(out), "--interval", "0.05", "--no-gpu"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"ready"
    proc.send_signal(signal.SIGINT)  # a terminal's Ctrl-C reaches the whole group
    sampled = engine_lines(out)
    assert wait_until(lambda: engine_lines(out) >= sampled + 2, PATIENCE_S)  # sampling on after it
    assert proc.poll() is None
    proc.stdin.close()
    assert proc.wait(timeout=PATIENCE_S) == 0
    assert proc.stderr.read() == b""


def test_a_proxy_in_the_environment_is_not_used(mock_server, monkeypatch):
    """The client reaches the server directly; so must the scraper (a proxy times the wrong hop)."""
    mock = mock_server()
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setenv("no_proxy", "")
    timeline, _, _ = record(metrics_url(mock.url))
    assert timeline.header["engine"]["status"] == "ok" and timeline.of("engine")


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2
                    or shutil.which("taskset") is None, reason="needs 2 CPUs and taskset")
def test_a_pinned_client_keeps_its_cpu(tmp_path):
    """The scraper inherits the client's taskset pinning; it moves to the other CPUs."""
    client_cpu = min(os.sched_getaffinity(0))
    proc = subprocess.Popen(["taskset", "-c", str(client_cpu), sys.executable, "-m", "servelab.telemetry.scrape",
                             f"http://127.0.0.1:{closed_port()}/metrics", str(tmp_path / "s.jsonl"), "--no-gpu"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline().strip() == b"ready"
        assert client_cpu not in os.sched_getaffinity(proc.pid)
    finally:
        proc.stdin.close()
        proc.wait(timeout=PATIENCE_S)


def test_latest_is_the_newest_whole_engine_line_read_from_where_it_stopped():
    with Recorder("http://127.0.0.1:9/metrics") as rec:
        assert rec.latest() is None  # nothing scraped yet
        scrape = rec._dir / "scrape.jsonl"
        scrape.write_text('{"src": "meta", "t_ns": 1}\n{"src": "engine", "t_ns": 2, "running": 3}\n'
                          '{"src": "engine-meta", "t_ns": 3}\n{"src": "engine", "t_ns": 4, "runn')
        assert rec.latest() == {"src": "engine", "t_ns": 2, "running": 3}  # the cut line waits
        with open(scrape, "a") as f:
            f.write('ing": 5}\n')
        assert rec.latest() == {"src": "engine", "t_ns": 4, "running": 5}
        assert rec.latest() == {"src": "engine", "t_ns": 4, "running": 5}  # no new line: the same
