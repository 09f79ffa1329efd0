"""bench/host_floor.py: the same author's Qwen3-0.6B, 1.7B and 14B on an A100, one request at a time, which
no step of the form overhead + bytes / bandwidth holds within 10 % (docs/planner.md, "Where the TPOT
target stops")."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("host_floor", ROOT / "bench" / "host_floor.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_best_line_through_points_on_a_line_is_that_line(script):
    worst, overhead, bandwidth = script.best_additive([(1e9, 3.5), (5e9, 5.5), (21e9, 13.5)])
    assert worst == pytest.approx(0, abs=1e-12)
    assert (overhead, bandwidth) == (pytest.approx(3.0), pytest.approx(2000.0))


def test_the_best_line_equalises_the_worst_error_with_alternating_signs(script):
    points = [(1e9, 4.0), (3e9, 4.5), (30e9, 27.0)]
    worst, overhead, bandwidth = script.best_additive(points)
    errors = [(overhead + x / 1e9 * 1e3 / bandwidth - m) / m for x, m in points]
    assert [e / worst for e in errors] == [pytest.approx(-1), pytest.approx(1), pytest.approx(-1)]
    # no line on a fine grid around it does better
    for do in (-0.05, 0.0, 0.05):
        for ds in (-0.005, 0.0, 0.005):
            slope = 1e3 / bandwidth + ds
            assert max(abs(overhead + do + slope * x / 1e9 - m) / m for x, m in points) >= worst - 1e-12


def test_no_overhead_and_bandwidth_hold_the_three_sizes_within_ten_percent(script):
    sizes = script.series()
    assert [model for model, _, _ in sizes] == ["Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B", "Qwen/Qwen3-14B"]
    (read0, ms0), (read1, ms1), _ = points = script.means(sizes)
    assert (ms0, ms1) == (pytest.approx(4.267, abs=1e-3), pytest.approx(4.7))
    assert (read1 - read0) / (ms1 - ms0) / 1e9 == pytest.approx(5.19, abs=0.01)  # 2.5x the A100-80GB datasheet
    worst, overhead, bandwidth = script.best_additive(points)
    assert (round(worst, 3), round(overhead, 2), round(bandwidth, -1)) == (0.128, 2.88, 1420)
    # the committed constants miss the two small sizes in opposite directions
    signs = {model: {p > r.measured["mean_tpot_ms"] for r, p in pairs} for model, _, pairs in sizes[:2]}
    assert signs == {"Qwen/Qwen3-0.6B": {False}, "Qwen/Qwen3-1.7B": {True}}


def test_a_size_missing_a_shared_workload_is_refused(script):
    model, read, pairs = script.series()[0]
    with pytest.raises(ValueError, match="2 of the 3 shared workloads"):
        script.means([(model, read, pairs[:2])])
