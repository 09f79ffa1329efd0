"""Grading a constrained answer: against the constraint itself, not parseability alone."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from servelab.datasets.structured import TEMPLATES, assign, body_fields, constraint
from servelab.mock.constrained import valid_text
from servelab.quality.graders import CONSTRAINT_GRADERS
from servelab.quality.structured import grade
from servelab.records import SampleRequest

PERSON = dict(TEMPLATES["json"])["person"]


def test_json_is_graded_against_the_schema_not_parseability():
    ok = CONSTRAINT_GRADERS["json"]
    assert ok(PERSON, '{"name": "Ada", "age": 36}')
    assert not ok(PERSON, '{"name": "Ada"}')  # parseable, a required field missing
    assert not ok(PERSON, '{"name": "Ada", "age": "36"}')  # parseable, the wrong type
    assert not ok(PERSON, '{"name": "Ada", "age": 36, "x": 1}')  # additionalProperties false
    assert not ok(PERSON, 'no json here')


def test_regex_must_match_the_whole_answer_and_choice_must_equal_one():
    assert CONSTRAINT_GRADERS["regex"](r"\d{4}-\d{2}-\d{2}", "2026-12-05")
    assert not CONSTRAINT_GRADERS["regex"](r"\d{4}-\d{2}-\d{2}", "on 2026-12-05")  # search would accept it
    assert CONSTRAINT_GRADERS["choice"](["red", "blue"], " red")
    assert not CONSTRAINT_GRADERS["choice"](["red", "blue"], "red, I think")


@settings(max_examples=60, deadline=None)
@given(pick=st.integers(0, 10_000))
def test_the_mock_answers_every_template_validly(pick):
    for kind, templates in TEMPLATES.items():
        for _, value in templates:
            assert CONSTRAINT_GRADERS[kind](value, valid_text(kind, value, pick))


def samples(n):
    return [SampleRequest(prompt=f"p{i}", prompt_len=2, expected_output_len=8, request_id=f"r{i}") for i in range(n)]


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 200), share=st.floats(0, 1), seed=st.integers(0, 99))
def test_exactly_the_share_of_requests_is_constrained_and_the_seed_names_them(n, share, seed):
    got = assign(samples(n), share, "mix", seed)
    assert len(got) == round(share * n) and got == assign(samples(n), share, "mix", seed)
    assert all(constraint(f)[0] in TEMPLATES for f in got.values())


def test_one_kind_only_and_failed_requests_counted_apart():
    fields = assign(samples(40), 1.0, "choice", 1)
    assert {constraint(f)[0] for f in fields.values()} == {"choice"}
    ids = [f"r{i}" for i in range(6)]
    sent = {"r0": body_fields("choice", ["ab", "b"]), "r1": body_fields("regex", "x+y"),
            "r2": body_fields("regex", "x+y"), "r3": body_fields("json", PERSON),
            "r4": body_fields("choice", ["ab", "b"]), "r5": body_fields("choice", ["ab", "b"])}
    # r2 stopped at max_tokens on a prefix the regex can still complete: cut, not counted against the
    # server; r4 stopped at max_tokens on a text no choice begins, r5 before it: both broken
    texts = ["ab", "xxy", "xxx", "", "zz", "a"]
    graded = grade(ids, [8, 8, 3, 8, 2, 8], texts, ["", "", "", "HTTP 500", "", ""], [1, 1, 3, 0, 2, 1], sent)
    s = graded.section["structured"]
    assert s["by_kind"] == {"json": {"valid": 0, "total": 0, "failed": 1, "cut": 0},
                            "regex": {"valid": 1, "total": 2, "failed": 0, "cut": 1},
                            "choice": {"valid": 1, "total": 3, "failed": 0, "cut": 0}}
    assert (s["valid"], s["total"], s["failed"], s["cut"], s["broken"], s["verdict"]) == (2, 5, 1, 1, 2, "partly invalid")
    assert graded.lines == ("valid against their own constraint: 2/5 = 40.0% (json 0/0, regex 1/2, choice 1/3); "
                            "1 failed (not graded)", "2 of 5 invalid (not explained by max_tokens)",
                            "1 of 5 cut at max_tokens while the constraint could still be met: give them more "
                            "output tokens (not counted against the server)")
    ignored = grade(ids[4:], [2, 8], texts[4:], ["", ""], [2, 1], sent).section["structured"]
    assert (ignored["broken"], ignored["verdict"]) == (2, "ignored")


def test_a_cut_answer_counts_for_the_server_only_when_the_constraint_could_still_be_met():
    from servelab.quality.structured import could_continue

    assert could_continue("json", PERSON, ' {"name": "Ad') and not could_continue("json", PERSON, "Sure! {")
    assert could_continue("regex", r"\d{4}-\d{2}", "202") and not could_continue("regex", r"\d{4}-\d{2}", "x")
    assert could_continue("choice", ["positive", "neutral"], "pos") and not could_continue("choice", ["a"], "b")


def test_extra_body_options_stay_beside_each_constraint():
    fields = assign(samples(4), 1.0, "json", 0, {"disable_any_whitespace": True})
    for f in fields.values():
        assert f["structured_outputs"]["disable_any_whitespace"] is True and constraint(f)[0] == "json"


def test_the_default_field_sends_structured_outputs_byte_for_byte_as_before():
    import json

    assert json.dumps(body_fields("choice", ["a", "b"])) == '{"structured_outputs": {"choice": ["a", "b"]}, "ignore_eos": false}'
    assert assign(samples(30), 0.5, "mix", 4) == assign(samples(30), 0.5, "mix", 4, None, "structured_outputs")


def test_response_format_draws_the_same_requests_and_schemas_and_grades_the_same():
    from servelab.mock.constrained import constraint_of

    vllm, portable = (assign(samples(50), 0.6, "json", 7, None, f) for f in ("structured_outputs", "response_format"))
    assert vllm.keys() == portable.keys()
    names = {json_name for json_name, _ in TEMPLATES["json"]}
    for rid, f in portable.items():
        rf = f["response_format"]
        assert set(f) == {"response_format", "ignore_eos"} and rf["type"] == "json_schema"
        assert rf["json_schema"]["name"] in names and rf["json_schema"]["strict"] is True
        assert constraint(f) == constraint(vllm[rid]) == constraint_of(f) == constraint_of(vllm[rid])
    ids, texts = sorted(vllm), ['{"name": "Ada", "age": 36}'] * len(vllm)
    lens = [4] * len(ids)
    a = grade(ids, lens, texts, [""] * len(ids), lens, vllm).section["structured"]
    b = grade(ids, lens, texts, [""] * len(ids), lens, portable, "response_format").section["structured"]
    assert (a.pop("field"), b.pop("field")) == ("structured_outputs", "response_format") and a == b
