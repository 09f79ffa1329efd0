"""Knee detection on synthetic curves: monotone, noisy, flat, non-monotone, failing."""

from servelab.search.knee import climb, find_knee, geometric_ladder
from servelab.search.points import Point, point_from_result


def curve(pairs, errors=None):
    errors = errors or {}
    return [Point(load, thr, {"median_e2el": lat}, errors.get(load, 0)) for load, thr, lat in pairs]


def test_monotone_curve_knee_where_throughput_flattens_and_latency_climbs():
    pts = curve([(1, 28, 1000), (2, 55, 1020), (4, 100, 1100), (8, 130, 1600), (16, 134, 3000), (32, 135, 6000)])
    k = find_knee(pts)
    assert (k.operating_index, k.saturated_index) == (3, 4)
    assert pts[k.operating_index].load == 8 and "8 → 16" in k.reason


def test_noise_below_latency_threshold_does_not_trigger():
    # throughput wobbles (+2 %) but latency barely moves: still scaling, not saturated
    pts = curve([(1, 100, 100), (2, 102, 105), (4, 190, 110), (8, 370, 118)])
    k = find_knee(pts)
    assert not k.saturated and k.operating_index == 3 and "not saturated up to load 8" in k.reason


def test_flat_curve_saturates_at_the_first_step():
    pts = curve([(1, 50, 100), (2, 50.5, 200), (4, 51, 400)])
    k = find_knee(pts)
    assert (k.operating_index, k.saturated_index) == (0, 1)


def test_non_monotone_dip_counts_as_no_gain():
    pts = curve([(1, 50, 100), (2, 95, 110), (4, 80, 300), (8, 140, 500)])
    k = find_knee(pts)
    assert k.saturated_index == 2 and "-15.8%" in k.reason


def test_errors_saturate_even_when_throughput_grows():
    pts = curve([(1, 50, 100), (2, 95, 110), (4, 180, 120)], errors={4: 3})
    assert find_knee(pts).saturated_index == 2
    assert find_knee(curve([(1, 5, 1)], errors={1: 1})).operating_index is None


def test_unsorted_input_is_sorted_by_load():
    pts = curve([(4, 51, 400), (1, 50, 100), (2, 50.5, 200)])
    assert find_knee(pts).saturated_index == 1


def test_geometric_ladder_includes_stop():
    assert geometric_ladder(1, 32) == [1, 2, 4, 8, 16, 32]
    assert geometric_ladder(1, 20) == [1, 2, 4, 8, 16, 20]


def test_point_from_result_reads_vllm_keys():
    p = point_from_result(8, {"output_throughput": 130.5, "failed": 1, "completed": 31, "p99_ttft_ms": 900.0,
                              "median_e2el_ms": 5000.0, "p99.9_itl_ms": 80.0, "model_id": "x_ms"})
    assert p.throughput == 130.5 and p.errors == 1
    assert p.latency_ms == {"p99_ttft": 900.0, "median_e2el": 5000.0, "p99.9_itl": 80.0}


def test_climb_stops_at_the_first_saturating_point():
    truth = {1: (28, 1000), 2: (55, 1020), 4: (100, 1100), 8: (130, 1600), 16: (134, 3000), 32: (135, 6000)}
    measured = []

    def measure(load):
        measured.append(load)
        thr, lat = truth[load]
        return Point(load, thr, {"median_e2el": lat})

    points = climb(measure, [1, 2, 4, 8, 16, 32])
    assert measured == [1, 2, 4, 8, 16] and [p.load for p in points] == measured  # 32 is never run
    assert find_knee(points).operating_index == 3


def test_climb_walks_the_whole_ladder_when_it_keeps_scaling():
    points = climb(lambda load: Point(load, 10 * load, {"median_e2el": 100}), [1, 2, 4])
    assert [p.load for p in points] == [1, 2, 4]


def test_point_from_result_reads_request_rates_and_goodput():
    p = point_from_result(4, {"output_throughput": 10.0, "request_throughput": 2.5, "request_goodput": 1.5})
    assert (p.request_throughput, p.goodput) == (2.5, 1.5)
    assert point_from_result(4, {"request_goodput": None}).goodput is None
    assert point_from_result(4, {"request_goodput": float("nan")}).goodput is None
