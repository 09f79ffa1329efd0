"""servelab/datasets/random.py: exact token lengths, vLLM's length draws, shared prefix."""

from __future__ import annotations

import math

import numpy as np
import pytest

from servelab.config import DatasetSpec
from servelab.datasets import sample_requests
from servelab.datasets.random import allowed_tokens, exact_prompts
from servelab.errors import InputError


def random_spec(**fields):
    return DatasetSpec(name="random", num_prompts=fields.pop("num_prompts", 30), **fields)


def assert_exact(requests, tokenizer):
    """Each prompt re-encodes to exactly prompt_len tokens, none of them special."""
    for r in requests:
        ids = tokenizer.encode(r.prompt)
        assert len(ids) == r.prompt_len, r.request_id
        assert not set(ids) & tokenizer.special_ids


def test_fixed_lengths_are_exact(qwen3):
    requests = sample_requests(random_spec(random_input_len=100, random_output_len=7), qwen3)
    assert len(requests) == 30
    assert {r.prompt_len for r in requests} == {100}
    assert {r.expected_output_len for r in requests} == {7}
    assert_exact(requests, qwen3)
    assert [r.request_id for r in requests] == [f"bench-{i}" for i in range(30)]


def test_range_ratio_lengths_are_exact_and_span_the_range(qwen3):
    spec = random_spec(num_prompts=60, random_input_len=64, random_output_len=20, random_range_ratio=0.5)
    requests = sample_requests(spec, qwen3)
    assert_exact(requests, qwen3)
    prompt_lens = [r.prompt_len for r in requests]
    assert 32 <= min(prompt_lens) < max(prompt_lens) <= 96
    assert len(set(prompt_lens)) > 20  # actually spread, not clustered
    assert all(10 <= r.expected_output_len <= 30 for r in requests)


def test_lengths_are_vllms_draws_for_the_same_seed(qwen3):
    # vLLM: input_lens, output_lens, offsets = three rng.integers calls on default_rng(seed).
    spec = random_spec(num_prompts=25, random_input_len=50, random_output_len=40, random_range_ratio=0.3, seed=11)
    requests = sample_requests(spec, qwen3)
    rng = np.random.default_rng(11)
    expected_in = rng.integers(math.floor(50 * 0.7), math.ceil(50 * 1.3) + 1, size=25)
    expected_out = rng.integers(math.floor(40 * 0.7), math.ceil(40 * 1.3) + 1, size=25)
    assert [r.prompt_len for r in requests] == expected_in.tolist()
    assert [r.expected_output_len for r in requests] == expected_out.tolist()


def test_independent_output_ratio(qwen3):
    spec = random_spec(random_input_len=20, random_output_len=100, random_output_range_ratio=0.5)
    requests = sample_requests(spec, qwen3)
    assert {r.prompt_len for r in requests} == {20}
    assert len({r.expected_output_len for r in requests}) > 5


def test_shared_prefix_is_token_exact_and_counted(qwen3):
    spec = random_spec(random_input_len=40, random_range_ratio=0.25, random_prefix_len=16)
    requests = sample_requests(spec, qwen3)
    assert_exact(requests, qwen3)
    prefixes = {tuple(qwen3.encode(r.prompt)[:16]) for r in requests}
    assert len(prefixes) == 1  # every prompt starts with the same 16 token ids
    assert all(16 + 30 <= r.prompt_len <= 16 + 50 for r in requests)


def test_output_lengths_never_reach_zero(qwen3):
    requests = sample_requests(random_spec(random_input_len=20, random_output_len=1, random_range_ratio=0.9), qwen3)
    assert {r.expected_output_len for r in requests} <= {1, 2}


def test_same_seed_same_requests_other_seed_differs(qwen3):
    spec = random_spec(num_prompts=10, random_input_len=30, random_range_ratio=0.2, random_prefix_len=4)
    first = sample_requests(spec, qwen3)
    assert sample_requests(spec, qwen3) == first
    other = sample_requests(random_spec(num_prompts=10, random_input_len=30, random_range_ratio=0.2,
                                        random_prefix_len=4, seed=1), qwen3)
    assert [r.prompt for r in other] != [r.prompt for r in first]


def test_prompts_differ_from_each_other(qwen3):
    requests = sample_requests(random_spec(random_input_len=30), qwen3)
    assert len({r.prompt for r in requests}) == len(requests)


def test_seam_merge_is_repaired(qwen3):
    # "hello" + "world" decodes to "helloworld", which encodes as other tokens.
    prefix, body = qwen3.encode("hello"), qwen3.encode("world")
    assert qwen3.encode("helloworld")[:1] != prefix  # the premise
    rng = np.random.default_rng(0)
    [(text, ids)] = exact_prompts(qwen3, prefix, [body], allowed_tokens(qwen3), rng)
    assert qwen3.encode(text) == ids
    assert ids[:1] == prefix and len(ids) == 2


def test_allowed_tokens_exclude_special_ids(qwen3):
    allowed = allowed_tokens(qwen3)
    assert len(allowed) == qwen3.vocab_size - len({i for i in qwen3.special_ids if i < qwen3.vocab_size})
    assert not set(allowed.tolist()) & qwen3.special_ids


@pytest.mark.parametrize(
    ("fields", "flag"),
    [
        ({"random_range_ratio": 1.0}, "--random-range-ratio"),
        ({"random_range_ratio": -0.1}, "--random-range-ratio"),
        ({"random_input_len": 0}, "--random-input-len"),
        ({"random_input_len": 1, "random_range_ratio": 0.5}, "--random-input-len"),
        ({"random_prefix_len": -1}, "--random-prefix-len"),
        ({"num_prompts": 0}, "--num-prompts"),
    ],
)
def test_impossible_settings_name_the_flag(qwen3, fields, flag):
    with pytest.raises(InputError, match=flag):
        sample_requests(random_spec(**fields), qwen3)
