"""quality/responses.py: a result's kept answers read back, and what it says about them."""

from __future__ import annotations

import pytest

from servelab.errors import InputError
from servelab.quality.responses import Responses, prompt_key, sampling_of


def result(texts, keys, sampling=None, errors=None, simulated=False):
    kept = {"keys": keys, "prompts": keys, "key_of": "token_ids", "simulated": simulated,
            "sampling": sampling or sampling_of({"temperature": 0.0}, {})}
    return {"generated_texts": texts, "errors": errors or [""] * len(texts), "servelab": {"responses": kept}}


def test_a_prompt_answered_twice_differently_at_temperature_0_is_said():
    r = Responses.of_result(result(["a", "b", "c"], ["k1", "k1", "k2"]), "run")
    assert r.texts == {"k1": "a", "k2": "c"} and r.inconsistent == 1
    assert r.warnings() == ["run: 1 prompt(s) asked twice got different answers at temperature 0: the server may "
                            "not honour greedy sampling or the seed"]


def test_no_temperature_sent_is_sampled_and_said():
    r = Responses.of_result(result(["a"], ["k1"], sampling=sampling_of({}, {"seed": 3})), "run")
    assert r.sampled and r.sampling == {"temperature": None, "seed": 3, "greedy": False}
    assert "no --temperature was sent" in r.warnings()[0]


def test_failed_requests_are_counted_apart():
    r = Responses.of_result(result(["a", ""], ["k1", "k2"], errors=["", "HTTP 500"]), "run")
    assert (r.texts, r.failed, r.asked) == ({"k1": "a"}, 1, frozenset({"k1", "k2"}))


@pytest.mark.parametrize("res, says", [
    ({"generated_texts": ["a"], "servelab": {}}, "run: no responses kept (run the bench with --save-detailed"),
    (result(["", ""], ["k1", "k2"]), "run: the server returned no text in any response"),
    (result(["a"], ["k1"], simulated=True), "run: quality not judged: a simulated run has no answers"),
])
def test_unusable_results_are_one_line(res, says):
    with pytest.raises(InputError, match=says.replace("(", r"\(")):
        Responses.of_result(res, "run")


def test_keys_hash_token_ids_so_the_same_ids_pair_whatever_their_form():
    class Tok:
        def encode(self, text):
            return [ord(c) for c in text]

    assert prompt_key("hi", Tok()) == prompt_key((104, 105), None) and prompt_key("hi", Tok())[1] == "token_ids"
    assert prompt_key("hi", None)[1] == "text"


def test_the_section_keys_a_run_by_token_ids_in_one_batch():
    from servelab.quality.responses import section
    from servelab.records import SampleRequest

    class Tok:
        batches = 0

        def encode_batch(self, texts):
            Tok.batches += 1
            return [[ord(c) for c in t] for t in texts]

    reqs = [SampleRequest("hi", 2, 4, "r0"), SampleRequest((104, 105), 2, 4, "r1"), SampleRequest("yo", 2, 4, "r2")]
    kept = section(reqs, [2, 0, 1], Tok(), False, sampling_of({"temperature": 0.0}, {}))["responses"]
    assert Tok.batches == 1 and kept["key_of"] == "token_ids"
    assert kept["keys"][1] == kept["keys"][2] != kept["keys"][0]  # "hi" as text and as ids: one key
    assert kept["prompts"] == ["yo", "hi", None]
