"""servelab/datasets/random.py: token lengths, vLLM's draws and fitting, shared prefix.
(Equality with vLLM's own sampler: tests/datasets/test_vllm_parity.py.)"""

from __future__ import annotations

import math

import numpy as np
import pytest

from servelab.config import DatasetSpec
from servelab.datasets import sample_requests
from servelab.datasets.random import allowed_tokens, fit_lengths
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
    requests = sample_requests(random_spec(random_input_len=100, random_output_len=7), qwen3).requests
    assert len(requests) == 30
    assert {r.prompt_len for r in requests} == {100}
    assert {r.expected_output_len for r in requests} == {7}
    assert_exact(requests, qwen3)
    assert [r.request_id for r in requests] == [f"bench-{i}" for i in range(30)]


def test_range_ratio_lengths_are_exact_and_span_the_range(qwen3):
    spec = random_spec(num_prompts=60, random_input_len=64, random_output_len=20, random_range_ratio=0.5)
    requests = sample_requests(spec, qwen3).requests
    assert_exact(requests, qwen3)
    prompt_lens = [r.prompt_len for r in requests]
    assert 32 <= min(prompt_lens) < max(prompt_lens) <= 96
    assert len(set(prompt_lens)) > 20  # actually spread, not clustered
    assert all(10 <= r.expected_output_len <= 30 for r in requests)


def test_lengths_are_vllms_draws_for_the_same_seed(qwen3):
    # vLLM: input_lens, output_lens, offsets = three rng.integers calls on default_rng(seed).
    spec = random_spec(num_prompts=25, random_input_len=50, random_output_len=40, random_range_ratio=0.3, seed=11)
    requests = sample_requests(spec, qwen3).requests
    rng = np.random.default_rng(11)
    expected_in = rng.integers(math.floor(50 * 0.7), math.ceil(50 * 1.3) + 1, size=25)
    expected_out = rng.integers(math.floor(40 * 0.7), math.ceil(40 * 1.3) + 1, size=25)
    assert [r.prompt_len for r in requests] == expected_in.tolist()
    assert [r.expected_output_len for r in requests] == expected_out.tolist()


def test_independent_output_ratio(qwen3):
    spec = random_spec(random_input_len=20, random_output_len=100, random_output_range_ratio=0.5)
    requests = sample_requests(spec, qwen3).requests
    assert {r.prompt_len for r in requests} == {20}
    assert len({r.expected_output_len for r in requests}) > 5


def test_shared_prefix_is_counted_and_mostly_token_exact(qwen3):
    spec = random_spec(random_input_len=40, random_range_ratio=0.25, random_prefix_len=16)
    requests = sample_requests(spec, qwen3).requests
    assert_exact(requests, qwen3)
    prefixes = [tuple(qwen3.encode(r.prompt)[:16]) for r in requests]
    # as in vLLM, a merge at the seam may change a prompt's first ids; most keep them
    assert max(prefixes.count(p) for p in set(prefixes)) >= len(requests) * 0.8
    assert all(16 + 30 <= r.prompt_len <= 16 + 50 for r in requests)


def test_output_lengths_never_reach_zero(qwen3):
    requests = sample_requests(random_spec(random_input_len=20, random_output_len=1, random_range_ratio=0.9), qwen3).requests
    assert {r.expected_output_len for r in requests} <= {1, 2}


def test_same_seed_same_requests_other_seed_differs(qwen3):
    spec = random_spec(num_prompts=10, random_input_len=30, random_range_ratio=0.2, random_prefix_len=4)
    first = sample_requests(spec, qwen3).requests
    assert sample_requests(spec, qwen3).requests == first
    other = sample_requests(random_spec(num_prompts=10, random_input_len=30, random_range_ratio=0.2,
                                        random_prefix_len=4, seed=1), qwen3).requests
    assert [r.prompt for r in other] != [r.prompt for r in first]


def test_prompts_differ_from_each_other(qwen3):
    requests = sample_requests(random_spec(random_input_len=30), qwen3).requests
    assert len({r.prompt for r in requests}) == len(requests)


def _draw(seed, qwen3):
    rng = np.random.default_rng(seed)
    return lambda k: rng.integers(0, qwen3.vocab_size, size=k).tolist()


def test_fitting_cuts_and_pads_to_the_target(qwen3):
    # "ab" + "cd" re-encodes as 1 token ("abcd"): short, so padded from the draw; the second is cut
    seqs = [qwen3.encode("ab") + qwen3.encode("cd"), qwen3.encode("a b c d e f")]
    assert len(qwen3.encode("abcd")) < 2  # the premise
    fitted = fit_lengths(qwen3, seqs, [2, 3], _draw(0, qwen3))
    for (text, ids), target in zip(fitted, [2, 3]):
        assert qwen3.encode(text) == ids and len(ids) == target


def test_batched_fitting_equals_one_at_a_time(qwen3):
    # the batches must hand out random ids in the order vLLM's sequential loop does
    rng = np.random.default_rng(5)
    allowed = allowed_tokens(qwen3)
    seqs = [allowed[rng.integers(0, len(allowed), size=n)].tolist() for n in rng.integers(3, 40, size=60)]
    targets = [len(s) for s in seqs]
    batched = fit_lengths(qwen3, seqs, targets, _draw(9, qwen3))
    draw = _draw(9, qwen3)
    assert batched == [fit_lengths(qwen3, [s], [t], draw)[0] for s, t in zip(seqs, targets)]


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
        sample_requests(random_spec(**fields), qwen3).requests
