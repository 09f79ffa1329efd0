"""quality/agreement.py on hand-made answers: exact shares, positions, the floor, each verdict."""

from __future__ import annotations

import pytest

from servelab.errors import InputError
from servelab.quality.agreement import DIVERGES, SAME, SAMPLED, agree, first_divergence, floor, pieces, verdict
from servelab.quality.responses import Responses

GREEDY = {"temperature": 0.0, "seed": None, "greedy": True}


def run(texts: dict[str, str], name="run", sampling=GREEDY, failed=()) -> Responses:
    return Responses(name, texts, frozenset(texts) | frozenset(failed), dict.fromkeys(texts), len(failed),
                     sampling, 0)


REF = {f"k{i}": "the cat sat on the mat ." for i in range(10)}


def test_shares_and_where_divergence_starts():
    other = dict(REF, k0="the dog sat on the mat .", k1="the cat sat on a mat .")
    a = agree(run(REF), run(other))
    assert (a.paired, a.identical) == (10, 8)
    assert a.prefix_share == pytest.approx((8 + 1 / 7 + 4 / 7) / 10)
    assert a.diverge_at == {"p10": 1.3, "p50": 2.5, "p90": 3.7}  # positions 1 and 4


def test_first_divergence_counts_a_shorter_answer():
    assert first_divergence(pieces("a b c"), pieces("a b")) == 2
    assert first_divergence(pieces("a, b"), pieces("a, b")) is None


def test_the_floor_is_the_lowest_agreement_among_repeats_and_judges_the_candidate():
    wobble = dict(REF, k9="the cat sat on the rug .")
    refs = [run(REF, "r0"), run(wobble, "r1"), run(REF, "r2")]
    f = floor(refs)
    assert (f.share, f.pairs) == (0.9, 3)
    near = run(dict(REF, k8="a cat sat on the mat ."))
    assert verdict(near, agree(refs[0], near), f) == SAME
    far = run({k: ("a dog" if int(k[1:]) < 6 else v) for k, v in REF.items()})
    assert verdict(far, agree(refs[0], far), f) == DIVERGES
    assert floor([refs[0]]).share == 1.0  # one reference: identity


def test_sampled_is_never_diverges_and_failures_are_not_wrong_answers():
    hot = run({k: "noise" for k in REF}, sampling={"temperature": 0.8, "seed": None, "greedy": False})
    assert verdict(hot, None, floor([run(REF)])) == SAMPLED
    some_failed = run({k: v for k, v in REF.items() if k != "k0"}, failed=["k0"])
    a = agree(run(REF), some_failed)
    assert (a.paired, a.identical, a.failed) == (9, 9, 1)


def test_a_reference_of_other_requests_says_how_many_prompts_differ():
    with pytest.raises(InputError, match="7 of its 10 prompts are not in the reference r0"):
        agree(run({f"k{i}": "x" for i in range(7, 17)}, "r0"), run(REF))
