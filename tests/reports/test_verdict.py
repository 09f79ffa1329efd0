"""The noise rule on hand-built numbers: within noise vs beyond, each direction."""

import pytest

from servelab.reports.verdict import BETTER, NOISE, SAME, UNKNOWN, WORSE, Spread, exact_verdict, rule_text, verdict


def s(*values):
    return Spread(tuple(values))


@pytest.mark.parametrize("base, other, higher, expected", [
    (s(100, 102), s(60, 61), True, WORSE),         # throughput fell, ranges apart, 40 % > 5 %
    (s(100, 102), s(130, 135), True, BETTER),
    (s(100, 102), s(101, 104), True, NOISE),       # ranges overlap
    (s(100, 102), s(103, 104), True, NOISE),       # apart, but only 2.5 %
    (s(100, 110), s(112, 118), True, NOISE),       # apart, but 9.5 %: under the 10 % floor
    (s(100, 110), s(118, 124), True, BETTER),      # apart, 15 %
    (s(100, 102), s(1000, 1100), False, WORSE),    # latency ×10: worse
    (s(1000, 1100), s(100, 102), False, BETTER),
    (s(100,), s(50, 51), True, UNKNOWN),           # one repeat: noise unknown
    (s(100, 100), s(100, 100), True, NOISE),
])
def test_verdict(base, other, higher, expected):
    assert verdict(base, other, higher) == expected


def test_the_floor_is_a_parameter():
    assert verdict(s(100, 102), s(103, 104), True, floor=0.01) == BETTER


def test_spread_statistics():
    x = s(10, 14, 12)
    assert (x.n, x.mean, x.lo, x.hi, x.half_range) == (3, 12, 10, 14, 2)


def test_exact_numbers_have_no_noise():
    assert exact_verdict(46592, 46592, True) == SAME
    assert exact_verdict(46592, 23296, True) == WORSE
    assert exact_verdict(0.25, 0.12, False) == BETTER


def test_the_rule_is_stated_with_its_floor_and_directions():
    text = rule_text(0.05)
    assert "do not overlap" in text and "5%" in text and "↑ higher is better" in text and "↓ lower" in text
