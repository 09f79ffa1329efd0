"""quality/score.py: the Wilson interval and the paired ratio rule, each verdict on purpose."""

from __future__ import annotations

import pytest

from servelab.quality.score import KEEPS, WORSE, paired, wilson


def test_wilson_matches_the_formula_and_its_ends_are_exact():
    lo, hi = wilson(8, 10)  # textbook value: 0.490 … 0.943
    assert (round(lo, 3), round(hi, 3)) == (0.490, 0.943)
    assert wilson(60, 60)[1] == 1.0 and wilson(0, 60)[0] == 0.0
    assert wilson(0, 0) == (0.0, 1.0)


def grades(rights: int, n: int, offset: int = 0) -> dict[str, bool]:
    return {f"k{i}": (i - offset) % n < rights for i in range(n)}


def test_identical_answers_keep_the_score():
    ref = grades(150, 300)
    assert paired(ref, dict(ref)).verdict == KEEPS


def test_a_fifth_of_right_answers_lost_is_worse():
    ref = grades(300, 300)
    run = {k: v and int(k[1:]) % 5 != 0 for k, v in ref.items()}
    p = paired(ref, run)
    assert p.verdict == WORSE and p.run_score == pytest.approx(0.8) and p.high < 0


def test_too_few_items_to_tell_says_so():
    ref = grades(10, 10)
    run = {k: int(k[1:]) != 3 for k in ref}  # one of ten lost: 90 % vs 100 %, but ten items
    assert paired(ref, run).verdict == "not distinguishable with 10 items"


def test_only_items_both_runs_answered_are_paired():
    ref = grades(10, 20)
    run = {k: v for k, v in ref.items() if k != "k0"}
    assert paired(ref, run).items == 19
