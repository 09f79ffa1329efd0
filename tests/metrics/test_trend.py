"""The over-saturation statistic on hand-built series: flat, noisy-flat, rising, tiny drift."""

import numpy as np

from servelab.metrics.trend import MIN_RISE, t95, trend


def test_a_straight_rising_line_is_rising_with_its_exact_slope():
    t = [i * 0.1 for i in range(30)]
    tr = trend(t, [5 + 2 * x for x in t])
    assert abs(tr.slope - 2) < 1e-9 and abs(tr.lower - 2) < 1e-9 and tr.rising


def test_noise_around_a_level_is_not_rising():
    rng = np.random.default_rng(0)
    t = [i * 0.1 for i in range(100)]
    flat = [trend(t, list(20 + rng.normal(0, 3, len(t)))) for _ in range(50)]
    assert sum(tr.rising for tr in flat) <= 3  # ≤ 5 % one-sided false alarms, and the rise floor cuts more


def test_a_certain_but_tiny_drift_is_not_saturation():
    t = [i * 0.1 for i in range(100)]
    tr = trend(t, [100 + 0.001 * x for x in t])  # rises 0.01 over the window: far below MIN_RISE of 100
    assert tr.lower > 0 and tr.rise < MIN_RISE * tr.mean and not tr.rising


def test_too_few_points_or_no_spread_in_time_say_nothing():
    assert trend([0, 1], [0, 1]) is None and trend([1, 1, 1], [0, 1, 2]) is None


def test_the_t_quantile_is_conservative_between_table_entries():
    assert t95(11) == t95(10) == 1.812 and t95(1000) == 1.645
