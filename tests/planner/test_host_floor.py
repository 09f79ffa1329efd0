"""planner/corpus/host_floor.py (bench/host_floor.py prints it): the same author's Qwen3-0.6B, 1.7B
and 14B on an A100, one request at a time, which no step of the form overhead + bytes / bandwidth
holds within 10 % (docs/planner.md, "Where the TPOT target stops")."""

import pytest

from servelab.planner.corpus import host_floor


def test_the_best_line_through_points_on_a_line_is_that_line():
    worst, overhead, bandwidth = host_floor.best_additive([(1e9, 3.5), (5e9, 5.5), (21e9, 13.5)])
    assert worst == pytest.approx(0, abs=1e-12)
    assert (overhead, bandwidth) == (pytest.approx(3.0), pytest.approx(2000.0))


def test_the_best_line_equalises_the_worst_error_with_alternating_signs():
    points = [(1e9, 4.0), (3e9, 4.5), (30e9, 27.0)]
    worst, overhead, bandwidth = host_floor.best_additive(points)
    errors = [(overhead + x / 1e9 * 1e3 / bandwidth - m) / m for x, m in points]
    assert [e / worst for e in errors] == [pytest.approx(-1), pytest.approx(1), pytest.approx(-1)]
    # no line on a fine grid around it does better
    for do in (-0.05, 0.0, 0.05):
        for ds in (-0.005, 0.0, 0.005):
            slope = 1e3 / bandwidth + ds
            assert max(abs(overhead + do + slope * x / 1e9 - m) / m for x, m in points) >= worst - 1e-12


def test_no_overhead_and_bandwidth_hold_the_three_sizes_within_ten_percent():
    sizes = host_floor.series()
    assert [model for model, _, _ in sizes] == ["Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B", "Qwen/Qwen3-14B"]
    (read0, ms0), (read1, ms1), _ = points = host_floor.means(sizes)
    assert (ms0, ms1) == (pytest.approx(4.267, abs=1e-3), pytest.approx(4.7))
    assert (read1 - read0) / (ms1 - ms0) / 1e9 == pytest.approx(5.19, abs=0.01)  # 2.5x the A100-80GB datasheet
    worst, overhead, bandwidth = host_floor.best_additive(points)
    assert (round(worst, 3), round(overhead, 2), round(bandwidth, -1)) == (0.128, 2.88, 1420)
    # the committed constants miss the two small sizes in opposite directions
    signs = {model: {p > r.measured["mean_tpot_ms"] for r, p in pairs} for model, _, pairs in sizes[:2]}
    assert signs == {"Qwen/Qwen3-0.6B": {False}, "Qwen/Qwen3-1.7B": {True}}


def test_a_size_missing_a_shared_workload_is_refused():
    model, read, pairs = host_floor.series()[0]
    with pytest.raises(ValueError, match="2 of the 3 shared workloads"):
        host_floor.means([(model, read, pairs[:2])])
