"""Timeline plots: the fixed set of PNGs, written even when data is missing."""

from __future__ import annotations

import pytest

from servelab.reports.timeline_plots import rate, series
from servelab.telemetry.timeline import Timeline

pytest.importorskip("matplotlib")
PNG = b"\x89PNG\r\n\x1a\n"


def timeline(engine_ok: bool = True, gpu: bool = False) -> Timeline:
    header = {"duration_s": 2.0, "engine": {"status": "ok"} if engine_ok else {"status": "absent", "detail": "HTTP 404"},
              "gpu": {"status": "ok", "devices": [{"index": 0, "power_limit_w": 700.0}]} if gpu else {"status": "absent"}}
    samples = []
    for i in range(9):
        t = i * 250.0
        if engine_ok:
            samples.append({"t_ms": t, "src": "engine", "running": 2.0, "waiting": 14.0 - i, "kv_usage": 0.1 * i,
                            "generation_tokens": 100.0 * i, "prompt_tokens": 40.0 * i})
        samples.append({"t_ms": t + 1, "src": "client", "in_flight": 16, "waiting": 9 - i})
        if gpu:
            samples.append({"t_ms": t + 2, "src": "gpu", "devices": [{"util": 90, "power_w": 350.0}]})
    return Timeline(header, samples)


def test_writes_the_plots(tmp_path):
    from servelab.reports.timeline_plots import plot_timeline

    paths = plot_timeline(timeline(gpu=True), tmp_path / "plots")
    assert [p.name for p in paths] == ["queue.png", "kv_usage.png", "tokens_per_s.png", "gpu.png"]
    assert all(p.read_bytes()[:8] == PNG and p.stat().st_size > 5000 for p in paths)


def test_missing_engine_data_still_gives_the_same_files(tmp_path):
    from servelab.reports.timeline_plots import plot_timeline

    paths = plot_timeline(timeline(engine_ok=False), tmp_path)
    assert [p.name for p in paths] == ["queue.png", "kv_usage.png", "tokens_per_s.png"]


def test_rate_of_a_counter_between_samples():
    samples = [{"t_ms": 0.0, "n": 0.0}, {"t_ms": 500.0, "n": 100.0}, {"t_ms": 1000.0, "n": 100.0},
               {"t_ms": 1500.0, "n": 50.0}]
    assert rate(samples, "n") == ([0.25, 0.75, 1.25], [200.0, 0.0, 0.0])  # a reset reads 0, not negative
    assert series([{"t_ms": 1000.0, "x": 1}, {"t_ms": 2000.0}], "x") == ([1.0], [1])
