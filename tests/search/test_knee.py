"""Knee detection on synthetic curves: monotone, noisy, flat, non-monotone, failing, and a
plateau an SLO bisection found between the ladder's steps."""

from servelab.search.knee import climb, find_knee, geometric_ladder
from servelab.search.points import Point, point_from_result


def curve(pairs, errors=None):
    errors = errors or {}
    return [Point(load, thr, {"median_e2el": lat}, errors.get(load, 0)) for load, thr, lat in pairs]


def test_monotone_curve_knee_where_throughput_flattens_and_latency_climbs():
    pts = curve([(1, 28, 1000), (2, 55, 1020), (4, 100, 1100), (8, 130, 1600), (16, 134, 3000), (32, 135, 6000)])
    k = find_knee(pts)
    assert (k.operating_index, k.saturated_index) == (3, 4)
    assert pts[k.operating_index].load == 8 and not k.climbing
    assert k.reason == "load 8 → 32: throughput within 5% of the best (135.0 out tok/s), median_e2el +275.0%"


def test_noise_below_latency_threshold_does_not_trigger():
    # throughput wobbles (+2 %) but latency barely moves: still scaling, not saturated
    pts = curve([(1, 100, 100), (2, 102, 105), (4, 190, 110), (8, 370, 118)])
    k = find_knee(pts)
    assert not k.saturated and k.operating_index == 3 and k.climbing
    assert k.reason == "load 8, the highest, is the best throughput, by more than 5% over every lower load"


def test_flat_curve_saturates_at_the_first_step():
    pts = curve([(1, 50, 100), (2, 50.5, 200), (4, 51, 400)])
    k = find_knee(pts)
    assert (k.operating_index, k.saturated_index) == (0, 1)


def test_a_dip_saturates_until_a_higher_load_beats_it_by_more_than_5_percent():
    pts = curve([(1, 50, 100), (2, 95, 110), (4, 80, 300), (8, 140, 500)])
    k = find_knee(pts[:3])  # what a climb has seen at 4: the best is 2, and 4 cost latency
    assert (k.operating_index, k.saturated_index) == (1, 2) and "load 2 → 4:" in k.reason
    k = find_knee(pts)  # 8 is the best, by 47 %: the curve still climbs
    assert (k.operating_index, k.saturated, k.climbing) == (3, False, True)


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


# issue 19 item 5: a ladder 4, 16, 64 and an SLO bisection at 28, 34, 37, 40; output tok/s flat at
# 2,499.7 from 34 to 64 while median E2EL grows 75 %
PLATEAU = [(4, 620.0, 200), (16, 1650.0, 300), (28, 2290.0, 380), (34, 2499.7, 420), (37, 2499.7, 450),
           (40, 2499.7, 480), (64, 2499.7, 735)]


def test_the_knee_of_a_plateau_is_its_lowest_load_over_every_measured_point():
    pts = curve(PLATEAU)
    k = find_knee(pts)
    assert (pts[k.operating_index].load, pts[k.saturated_index].load) == (34, 37)
    assert k.reason == "load 34 → 64: throughput within 5% of the best (2,499.7 out tok/s), median_e2el +75.0%"
    ladder = [p for p in pts if p.load in (4, 16, 64)]  # the ladder alone still climbs (+51 % at 64)
    assert find_knee(ladder).climbing


def test_not_saturated_only_when_the_top_load_is_the_best_by_more_than_5_percent():
    # each step adds < 5 % at < 20 % more latency, but 16 → 24 is +37.5 % on a plateau within 5 %
    slow_climb = curve([(8, 1500, 300), (16, 2400, 400), (20, 2450, 460), (24, 2460, 550)])
    k = find_knee(slow_climb)
    assert (k.operating_index, k.saturated_index, k.climbing) == (1, 2, False)
    beats = curve([(8, 1500, 300), (16, 2400, 400), (24, 2530, 550)])  # 24 is best by 5.4 %
    assert (find_knee(beats).operating_index, find_knee(beats).climbing) == (2, True)
    within = curve([(8, 1500, 300), (16, 2400, 400), (24, 2520, 550)])  # by 5.0 %: 16 is within 5 %
    assert (find_knee(within).operating_index, find_knee(within).saturated_index) == (1, 2)


def test_a_plateau_whose_latency_does_not_rise_is_no_knee_and_not_climbing():
    k = find_knee(curve([(1, 100, 100), (2, 200, 100), (4, 202, 100)]))
    assert (k.operating_index, k.saturated, k.climbing) == (2, False, False)  # 4 costs nothing over 2
    assert k.reason == "load 2 → 4: throughput within 5% of the best, and median_e2el does not rise with load"
    k = find_knee(curve([(1, 100, 100), (2, 200, 100), (4, 202, 110)]))  # +10 %: the operating point, no knee
    assert (k.operating_index, k.saturated_index) == (1, None) and k.reason.endswith("+10.0%, not > 20%")


def test_a_failed_load_saturates_and_nothing_above_it_counts():
    pts = curve([(1, 50, 100), (2, 95, 110), (4, 180, 120), (8, 400, 90)], errors={4: 3})
    k = find_knee(pts)
    assert (k.operating_index, k.saturated_index) == (1, 2) and k.reason == "3 failed requests at load 4"


def test_with_an_slo_the_climb_stops_at_the_first_load_that_misses_it_not_at_the_knee():
    measured = climb(lambda load: Point(load, 10 * load, {"p99_ttft": 100 * load}), [1, 2, 4, 8],
                     limits={"p99_ttft": 250})
    assert [p.load for p in measured] == [1, 2, 4]
