"""servelab/datasets/prefix_repetition.py: shared prefixes; counts; shuffle; the arrival stream.
(Equality with vLLM's own sampler: tests/datasets/test_vllm_parity.py.)"""

from __future__ import annotations

from collections import Counter

import pytest

from servelab.config import DatasetSpec
from servelab.datasets import sample_requests
from servelab.errors import InputError


def spec(**fields):
    base = dict(name="prefix_repetition", num_prompts=23, prefix_repetition_prefix_len=12,
                prefix_repetition_suffix_len=9, prefix_repetition_num_prefixes=4, prefix_repetition_output_len=5)
    return DatasetSpec(**(base | fields))


def prefix_of(request, tokenizer, chars=10):
    # as in vLLM, the joined ids are decoded and not re-encoded: compare the text's start
    return request.prompt[:chars]


def test_counts_lengths_and_shared_prefixes(qwen3):
    requests = sample_requests(spec(), qwen3).requests
    assert len(requests) == 20  # 23 // 4 = 5 per prefix, no top-up (as vLLM)
    for r in requests:
        assert r.prompt_len == 21  # prefix + suffix ids
        assert abs(len(qwen3.encode(r.prompt)) - 21) <= 5  # seams (as in vLLM) may change the re-encoding
        assert r.expected_output_len == 5
    groups = Counter(prefix_of(r, qwen3) for r in requests)
    assert sorted(groups.values()) == [5, 5, 5, 5]  # 4 distinct prefixes, 5 prompts each
    assert len({r.prompt for r in requests}) == 20  # every suffix is fresh
    assert [r.request_id for r in requests] == [f"bench-{i}" for i in range(20)]


def test_shuffled_unless_disabled(qwen3):
    def runs(requests):  # how many times the prefix changes from one request to the next
        keys = [prefix_of(r, qwen3) for r in requests]
        return sum(a != b for a, b in zip(keys, keys[1:]))

    assert runs(sample_requests(spec(shuffle=False), qwen3).requests) == 3  # grouped: AAAAA BBBBB CCCCC DDDDD
    assert runs(sample_requests(spec(), qwen3).requests) > 3


def test_same_seed_same_requests_other_seed_differs(qwen3):
    first = sample_requests(spec(), qwen3).requests
    assert sample_requests(spec(), qwen3).requests == first
    assert [r.prompt for r in sample_requests(spec(seed=9), qwen3).requests] != [r.prompt for r in first]


def test_fewer_prompts_than_prefixes_names_both_flags(qwen3):
    with pytest.raises(InputError, match=r"--num-prompts \(3\) must be >= --prefix-repetition-num-prefixes \(4\)"):
        sample_requests(spec(num_prompts=3), qwen3).requests


def test_the_sample_carries_the_arrival_stream_after_its_draws(qwen3):
    # vLLM draws send times from the stream the prompts were drawn from: it must have moved on
    import numpy as np

    state = sample_requests(spec(), qwen3).arrival_state
    fresh = np.random.RandomState(0).get_state()
    assert state is not None and state[2] != fresh[2] or not np.array_equal(state[1], fresh[1])
