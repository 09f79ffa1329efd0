"""``--lora-assignment``: each rule's popularity shape, checked on the draws themselves."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from servelab.spec_checks import lora_rule
from servelab.errors import InputError
from servelab.loadgen.lora import counts, request_models
from servelab.records import SampleRequest

ADAPTERS = ("a1", "a2", "a3", "a4")


def samples(n: int) -> list[SampleRequest]:
    return [SampleRequest(prompt=f"p{i}", prompt_len=1, expected_output_len=1, request_id=f"r{i}") for i in range(n)]


def drawn(rule: str, n: int, seed: int = 1, modules=ADAPTERS) -> list[str]:
    return list(request_models(samples(n), modules, rule, seed).values())


@given(n=st.integers(1, 200), k=st.integers(1, 9), seed=st.integers(0, 2**16))
def test_uniform_gives_every_adapter_the_same_count_within_one(n, k, seed):
    modules = tuple(f"m{i}" for i in range(k))
    per = counts(request_models(samples(n), modules, "uniform", seed), modules)
    assert sum(per.values()) == n and max(per.values()) - min(per.values()) <= 1


def test_identical_and_distinct_and_round_robin():
    assert drawn("identical", 5) == ["a1"] * 5
    assert drawn("distinct", 4) == list(ADAPTERS)
    assert drawn("round-robin", 6) == ["a1", "a2", "a3", "a4", "a1", "a2"]


def test_distinct_with_more_requests_than_adapters_is_one_line_not_an_index_error():
    """--num-prompts counts an agentic run's sessions, and each session makes several requests:
    check_spec cannot see the calls, so the draw says it in one line."""
    with pytest.raises(InputError, match="this run's 5 requests .* need at least 5 names in --lora-modules"):
        drawn("distinct", 5)


def test_zipf_counts_follow_rank_to_the_minus_alpha():
    """20,000 draws at alpha 1.2: each adapter's share within 1 point of r^-1.2 / sum (a binomial
    share's standard deviation here is at most 0.35 points: 1 point is about 3 of them)."""
    n = 20_000
    per = counts(request_models(samples(n), ADAPTERS, "zipf:1.2", 7), ADAPTERS)
    weights = [r ** -1.2 for r in range(1, 5)]
    for (_, count), w in zip(per.items(), weights):
        assert count / n == pytest.approx(w / sum(weights), abs=0.01)
    assert list(per.values()) == sorted(per.values(), reverse=True)


def test_zipf_0_is_uniform_in_law_and_the_seed_names_every_draw():
    assert drawn("zipf:0", 50, seed=3) == drawn("zipf:0", 50, seed=3) != drawn("zipf:0", 50, seed=4)
    per = counts(request_models(samples(8000), ADAPTERS, "zipf:0", 3), ADAPTERS)
    assert all(abs(c / 8000 - 0.25) < 0.02 for c in per.values())


def test_random_keeps_its_draws():
    """vLLM's ``random`` rule draws as it did before the new rules came (the same seed, the same adapters)."""
    rng = np.random.default_rng([5, 0x10A])
    assert drawn("random", 30, seed=5) == [ADAPTERS[j] for j in rng.integers(0, 4, size=30)]


@pytest.mark.parametrize("text", ["zipf", "zipf:", "zipf:-1", "zipf:nan", "zipf:inf", "zipfian:1", "skewed"])
def test_a_rule_we_do_not_know_is_one_line_naming_the_flag(text):
    with pytest.raises(InputError, match=r"^--lora-assignment .*zipf:ALPHA"):
        lora_rule(text)


def test_rules_parse():
    assert lora_rule("zipf:1.5") == ("zipf", 1.5) and lora_rule("uniform") == ("uniform", None)
    assert math.isclose(lora_rule("zipf:0")[1], 0.0)
