"""SLO search on synthetic curves, counting how many runs it spends."""

import pytest

from servelab.errors import InputError
from servelab.search.points import Point
from servelab.search.slo import binding, meets, parse_slo, search, text


def latency_curve(f):
    calls = []

    def measure(load):
        calls.append(load)
        return Point(load, 10 * load, {"p99_ttft": f(load)})

    return measure, calls


def test_bracket_then_bisect_integer_concurrency():
    measure, calls = latency_curve(lambda c: 100 + 20 * c)  # meets ttft ≤ 500 up to c = 20
    r = search(measure, [1, 2, 4, 8, 16, 32, 64], {"p99_ttft": 500}, integer=True, rel_tol=0.0, max_bisect=10)
    assert r.status == "met" and r.best.load == 20 and r.first_fail.load == 21
    assert calls[:6] == [1, 2, 4, 8, 16, 32] and 64 not in calls  # stops at the first failure
    assert len(calls) <= 6 + 5  # bisection, not 1-step walking
    assert r.interpolated_load == pytest.approx(20.0)


def test_interpolation_between_bracket_ends_for_rates():
    measure, _ = latency_curve(lambda r: 50 * r)
    res = search(measure, [1.0, 2.0, 4.0, 8.0], {"p99_ttft": 300}, integer=False, rel_tol=0.5, max_bisect=1)
    assert res.best.load == 6.0 and res.first_fail.load == 8.0  # one bisection of [4, 8]
    assert res.interpolated_load == pytest.approx(6.0)


def test_no_point_meets_is_reported_not_raised():
    measure, calls = latency_curve(lambda c: 10_000)
    r = search(measure, [1, 2, 4], {"p99_ttft": 500})
    assert r.status == "none-meets" and r.best is None and r.first_fail.load == 1 and calls == [1]


def test_every_point_meets():
    measure, calls = latency_curve(lambda c: 1)
    r = search(measure, [1, 2, 4], {"p99_ttft": 500})
    assert r.status == "all-meet" and r.best.load == 4 and r.interpolated_load is None
    assert calls == [1, 2, 4]  # the whole ladder, no bisection


def test_non_monotone_latency_keeps_the_measured_pass():
    # 8 passes, 16 fails, 12 fails, 10 passes: answer is 10 (measured), never 12
    lat = {1: 10, 2: 10, 4: 10, 8: 400, 16: 900, 12: 700, 10: 450, 11: 600}
    measure, _ = latency_curve(lambda c: lat[c])
    r = search(measure, [1, 2, 4, 8, 16], {"p99_ttft": 500}, max_bisect=5)
    assert r.best.load == 10 and r.first_fail.load == 11


def test_noisy_latency_answers_a_load_measured_to_meet_and_stays_near_the_true_crossing():
    import numpy as np

    rng = np.random.default_rng(3)
    noise = {}  # one draw per load: a rerun of a load sees the same noise, as a kept run would

    def noisy(c):
        return 100 + 20 * c + noise.setdefault(c, rng.normal(0, 30))  # the noise-free curve crosses 500 at c = 20
    measure, calls = latency_curve(noisy)
    r = search(measure, [1, 2, 4, 8, 16, 32, 64], {"p99_ttft": 500}, integer=True, rel_tol=0.0, max_bisect=10)
    assert r.status == "met" and noisy(r.best.load) <= 500 < noisy(r.first_fail.load)
    assert r.first_fail.load == r.best.load + 1 and 16 <= r.best.load <= 24  # within the noise of c = 20
    assert len(calls) <= 6 + 5


def test_a_flat_curve_that_meets_everywhere_or_nowhere_needs_no_bisection():
    for level, status in ((499, "all-meet"), (501, "none-meets")):
        measure, calls = latency_curve(lambda c, level=level: level)
        r = search(measure, [1, 2, 4, 8], {"p99_ttft": 500})
        assert r.status == status and calls == ([1, 2, 4, 8] if status == "all-meet" else [1])


def test_failures_fail_the_slo_and_parse_slo_errors():
    assert not meets(Point(1, 1, {"p99_ttft": 1}, errors=1), {"p99_ttft": 5})
    assert parse_slo("ttft:500, tpot:50") == {"p99_ttft": 500.0, "p99_tpot": 50.0}
    with pytest.raises(InputError, match="--slo"):
        parse_slo("latency:5")


def test_binding_names_the_limit_closest_to_or_furthest_past_its_bound():
    limits = {"p99_ttft": 500, "p99_tpot": 50}
    assert binding(Point(1, 1, {"p99_ttft": 100, "p99_tpot": 45}), limits) == "p99_tpot"  # 90 % of its limit
    assert binding(Point(1, 1, {"p99_ttft": 900, "p99_tpot": 60}), limits) == "p99_ttft"  # 180 % vs 120 %
    assert binding(Point(1, 1, {"p99_ttft": 100}), limits) == "p99_ttft"  # a missing statistic cannot bind


def test_one_slo_text_in_the_three_spellings_the_outputs_print():
    limits = {"p99_ttft": 500.0, "p99_e2el": 2500.0}
    assert text(limits) == "p99_ttft ≤ 500 ms, p99_e2el ≤ 2500 ms"
    assert text(limits, "words") == "p99 ttft ≤ 500 ms, p99 e2el ≤ 2500 ms"
    assert text(limits, "metric") == "p99 TTFT ≤ 500 ms, p99 E2EL ≤ 2500 ms"
    assert text({}) == ""
