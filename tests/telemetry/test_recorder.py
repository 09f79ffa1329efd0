"""The scraper process and the recorder, against the mock and against nothing."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from servelab.telemetry.recorder import Recorder, metrics_url


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def record(url: str, seconds: float, interval_s: float = 0.05):
    with Recorder(url, interval_s=interval_s, gpu=False) as rec:
        rec.start()
        assert rec.wait_ready()
        t0 = time.perf_counter_ns()
        time.sleep(seconds)
        return rec.stop(t0, time.perf_counter_ns())


def test_scrapes_the_mock_on_the_client_clock(mock_server):
    mock = mock_server(max_open=2)
    timeline = record(metrics_url(mock.url + "/"), 0.5)
    engine = timeline.during("engine")
    assert 3 <= len(engine) <= 12  # 0.5 s at 20 Hz, give or take a slow tick on a busy machine
    assert engine[0]["running"] == 0.0 and engine[0]["kv_usage"] == 0.0 and engine[0]["scrape_ms"] > 0
    assert timeline.header["engine"]["names"]["running"] == "vllm:num_requests_running"
    assert timeline.header["gpu"] == {"status": "absent", "detail": "disabled (--no-gpu)", "devices": []}
    assert timeline.header["metrics_url"] == mock.url + "/metrics"
    ts = [s["t_ms"] for s in timeline.samples]
    # the same clock as ours: the scraper's samples land around our window, not seconds away
    assert ts == sorted(ts) and -200 < ts[0] < 200 and 300 < ts[-1] < 800


def test_a_server_without_metrics_is_recorded_as_absent():
    timeline = record(f"http://127.0.0.1:{closed_port()}/metrics", 0.3)
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
    time.sleep(0.2)
    assert proc.poll() is None
    t = time.monotonic()
    proc.stdin.close()
    assert proc.wait(timeout=5) == 0 and time.monotonic() - t < 1.0
    assert proc.stderr.read() == b""
    assert out.read_text().count('"src": "engine"') >= 2


def test_a_proxy_in_the_environment_is_not_used(mock_server, monkeypatch):
    """The client reaches the server directly; so must the scraper (a proxy times the wrong hop)."""
    mock = mock_server()
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setenv("no_proxy", "")
    timeline = record(metrics_url(mock.url), 0.3)
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
        proc.wait(timeout=5)
