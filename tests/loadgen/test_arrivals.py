import numpy as np
import pytest

from servelab.loadgen.arrivals import arrival_offsets_ns, arrival_rng, ramp_rates, trace_offsets_ns


def test_infinite_rate_sends_all_at_t0():
    assert arrival_offsets_ns(5, float("inf"), 1.0, np.random.default_rng(0)).tolist() == [0] * 5


def test_last_offset_is_exactly_n_over_rate():
    off = arrival_offsets_ns(1000, 10.0, 1.0, np.random.default_rng(1))
    assert off[-1] == 100 * 10**9
    assert np.all(np.diff(off) >= 0)


def test_poisson_gaps_have_mean_one_over_rate_and_cv_one():
    off = arrival_offsets_ns(20000, 50.0, 1.0, np.random.default_rng(2)) / 1e9
    gaps = np.diff(off)
    assert gaps.mean() == pytest.approx(1 / 50, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.05)  # exponential: CV 1


def test_burstiness_sets_spread_cv_is_one_over_sqrt_shape():
    for shape in (0.25, 4.0):
        gaps = np.diff(arrival_offsets_ns(20000, 5.0, shape, np.random.default_rng(3)) / 1e9)
        assert gaps.std() / gaps.mean() == pytest.approx(1 / np.sqrt(shape), rel=0.06)


def test_infinite_burstiness_is_uniform():
    gaps = np.diff(arrival_offsets_ns(10, 4.0, float("inf"), np.random.default_rng(0)))
    assert set(gaps.tolist()) == {250_000_000}


def test_seed_reproducible_and_seeds_differ():
    a = arrival_offsets_ns(50, 3.0, 1.0, np.random.default_rng(7))
    b = arrival_offsets_ns(50, 3.0, 1.0, np.random.default_rng(7))
    c = arrival_offsets_ns(50, 3.0, 1.0, np.random.default_rng(8))
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_bad_rate_rejected():
    with pytest.raises(ValueError):
        arrival_offsets_ns(3, 0.0, 1.0, np.random.default_rng(0))


def test_ramp_up_rates_go_from_start_to_end():
    assert ramp_rates(5, "linear", 2, 10).tolist() == [2, 4, 6, 8, 10]
    assert np.allclose(ramp_rates(3, "exponential", 1, 100), [1, 10, 100])
    with pytest.raises(ValueError, match="ramp-up strategy"):
        ramp_rates(3, "step", 1, 2)


def test_ramp_up_offsets_are_not_rescaled():
    # with a ramp, the gaps are drawn at each request's rate and the sum stays as drawn
    off = arrival_offsets_ns(3, float("inf"), float("inf"), arrival_rng(0), ("linear", 1, 4))
    assert off.tolist() == [1_000_000_000, 1_400_000_000, 1_650_000_000]


def test_the_legacy_stream_can_continue_where_a_dataset_left_it():
    rng = np.random.RandomState(5)
    rng.randint(0, 100, size=7)
    state = rng.get_state()
    expected = arrival_offsets_ns(20, 3.0, 1.0, rng)
    assert arrival_offsets_ns(20, 3.0, 1.0, arrival_rng(5, state)).tolist() == expected.tolist()
    assert arrival_offsets_ns(20, 3.0, 1.0, arrival_rng(5)).tolist() != expected.tolist()


def test_trace_offsets_keep_file_order():
    # a stamp earlier than the one before goes right after it; negative goes at t0
    assert trace_offsets_ns([-1.0, 0.5, 0.25, 2.0]).tolist() == [0, 500_000_000, 500_000_000, 2_000_000_000]
