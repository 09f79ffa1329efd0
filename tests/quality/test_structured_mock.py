"""Structured output end to end: ``servelab bench --structured-share`` against the mock, which
honours each constraint (mock/constrained.py) or ignores them all; its truth — which answers it
gave whole and valid, which it cut at max_tokens, which requests failed — is what the result's
``servelab.structured`` must equal exactly."""

from __future__ import annotations

import json

import pytest
from mock_bench import bench as mock_bench
from mock_bench import write_prompts


N = 60


@pytest.fixture(autouse=True)
def prompts(tmp_path):
    return write_prompts(tmp_path, N, "Describe thing {}.")


def bench(url, tok, out, *extra, backend="vllm"):
    return mock_bench(url, tok, out, *extra, n=N, output_len=8, backend=backend)


def structured(path) -> dict:
    return json.loads(path.read_text())["servelab"]["structured"]


def constrained_truth(mock) -> list:
    return [r for r in mock.truth().requests if r.constraint is not None]


def test_validity_equals_the_mocks_truth_with_cuts_and_failures_apart(mock_server, qwen3_path, tmp_path, capsys):
    # 8 output tokens: a choice, a regex and the 6-token person fit; the order and event schemas (11) are cut
    mock = mock_server(error_rate=0.15, keep_requests=True)
    out = tmp_path / "r.json"
    assert bench(mock.url, qwen3_path, out, "--structured-share", "0.6", "--seed", "3") == 0
    got, truth = structured(out), constrained_truth(mock)
    assert len(truth) == round(0.6 * N)
    failed = [r for r in truth if r.finish == "http500"]
    answered = [r for r in truth if r.finish != "http500"]
    assert failed and got["failed"] == len(failed) and got["total"] == len(answered)
    valid = {rid for rid, _, ok in got["grades"] if ok}
    assert valid == {r.request_id for r in answered if r.honoured}  # the mock's truth, request by request
    cut = [r for r in answered if not r.honoured]
    assert cut and got["valid"] == len(answered) - len(cut) and got["cut"] == len(cut)
    assert {kind for _, kind, _ in got["grades"]} == {"json", "regex", "choice"}
    for kind, c in got["by_kind"].items():
        ok = [r for r in answered if r.constraint == kind]
        assert c == {"valid": sum(r.honoured for r in ok), "total": len(ok), "cut": sum(not r.honoured for r in ok),
                     "failed": sum(r.constraint == kind for r in failed)}
    assert got["verdict"] == "enforced" and got["broken"] == 0  # every invalid answer was cut mid-constraint
    said = capsys.readouterr().out
    assert f"servelab: structured output · valid against their own constraint: {got['valid']}/{got['total']}" in said
    assert f"{len(cut)} of {got['total']} cut at max_tokens while the constraint could still be met" in said
    assert "ignore the constraint" not in said
    bodies = mock.truth().bodies("/v1/completions")
    sent = [b for b in bodies if "structured_outputs" in b]
    assert len(sent) == round(0.6 * N) and all(b["ignore_eos"] is False for b in sent)
    assert not any(k.startswith("guided_") for b in bodies for k in b)


def test_an_enforcing_server_is_all_valid_and_the_seed_names_the_assignment(mock_server, qwen3_path, tmp_path):
    mock = mock_server(keep_requests=True)
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    args = ("--structured-share", "0.5", "--structured-kind", "regex", "--custom-output-len", "16")
    assert bench(mock.url, qwen3_path, first, *args) == 0
    got = structured(first)
    assert got["valid"] == got["total"] == N // 2 and got["verdict"] == "enforced"
    assert list(got["by_kind"]) == ["regex"]
    sent = [(b["prompt"], b["structured_outputs"]) for b in mock.truth().bodies("/v1/completions")
            if "structured_outputs" in b]
    mock.reset_truth()
    assert bench(mock.url, qwen3_path, second, *args) == 0
    again = [(b["prompt"], b["structured_outputs"]) for b in mock.truth().bodies("/v1/completions")
             if "structured_outputs" in b]
    assert sorted(map(json.dumps, again)) == sorted(map(json.dumps, sent))


def test_a_server_that_ignores_the_constraint_is_named(mock_server, qwen3_path, tmp_path, capsys):
    mock = mock_server(ignore_constraints=True)
    out = tmp_path / "r.json"
    assert bench(mock.url, qwen3_path, out, "--structured-share", "1", "--custom-output-len", "16") == 0
    got = structured(out)
    assert got["valid"] == 0 and got["total"] == N and got["verdict"] == "ignored"
    assert not any(r.honoured for r in constrained_truth(mock))
    # its answers run to max_tokens (16) too, but no constraint could still be met from them
    assert got["cut"] == 0 and got["broken"] == N
    assert f"the server seems to ignore the constraint: {N} of {N} invalid" in capsys.readouterr().out


def test_chat_requests_carry_the_constraint_too(mock_server, qwen3_path, tmp_path):
    mock = mock_server(keep_requests=True)
    out = tmp_path / "r.json"
    assert bench(mock.url, qwen3_path, out, "--structured-share", "0.5", "--structured-kind", "json",
                 "--custom-output-len", "16", backend="openai-chat") == 0
    got = structured(out)
    assert got["valid"] == got["total"] == N // 2
    sent = [b for b in mock.truth().bodies("/v1/chat/completions") if "structured_outputs" in b]
    assert len(sent) == N // 2 and all("json" in b["structured_outputs"] for b in sent)


@pytest.mark.parametrize("flags, said", [
    (("--structured-share", "1.5"), "--structured-share must be in [0, 1], got 1.5"),
    (("--structured-share", "0.5", "--structured-kind", "xml"),
     "--structured-kind 'xml': choose from json, regex, choice, mix"),
    (("--structured-share", "0.5", "--simulate"), "--structured-share needs a server"),
])
def test_bad_input_is_one_line(flags, said, mock_server, qwen3_path, tmp_path, capsys):
    assert bench(mock_server().url, qwen3_path, tmp_path / "r.json", *flags) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err


def test_client_workers_send_the_same_constraints(mock_server, qwen3_path, tmp_path):
    mock = mock_server()
    out = tmp_path / "r.json"
    assert bench(mock.url, qwen3_path, out, "--structured-share", "0.5", "--custom-output-len", "16",
                 "--workers", "2") == 0
    got = structured(out)
    assert got["valid"] == got["total"] == N // 2 == len(constrained_truth(mock))


PORTABLE = ("--structured-kind", "json", "--structured-field", "response_format")


@pytest.mark.parametrize("backend, path", [("vllm", "/v1/completions"), ("openai-chat", "/v1/chat/completions")])
def test_response_format_reaches_the_mock_with_the_schema(backend, path, mock_server, qwen3_path, tmp_path):
    from servelab.datasets.structured import TEMPLATES

    mock = mock_server(keep_requests=True)
    out = tmp_path / "r.json"
    assert bench(mock.url, qwen3_path, out, "--structured-share", "0.5", *PORTABLE, "--custom-output-len", "16",
                 backend=backend) == 0
    bodies = mock.truth().bodies(path)
    sent = [b for b in bodies if "response_format" in b]
    assert len(sent) == N // 2 and not any("structured_outputs" in b for b in bodies)
    schemas = dict(TEMPLATES["json"])
    for b in sent:  # OpenAI's json_schema form: a name, the template's schema, strict
        rf = b["response_format"]
        assert rf["type"] == "json_schema" and set(rf["json_schema"]) == {"name", "schema", "strict"}
        assert rf["json_schema"]["strict"] is True and schemas[rf["json_schema"]["name"]] == rf["json_schema"]["schema"]
        assert b["ignore_eos"] is False
    got = structured(out)
    assert got["field"] == "response_format" and got["valid"] == got["total"] == N // 2
    assert sum(r.honoured for r in constrained_truth(mock)) == N // 2  # the mock honoured each one


def test_response_format_grades_exactly_as_structured_outputs(mock_server, qwen3_path, tmp_path):
    # 8 output tokens: the person schema fits, the order and event schemas are cut; 15% of requests fail.
    # A fresh mock per field and one request at a time: the k-th request gets the same failure draw in both
    runs = {}
    for field in ("structured_outputs", "response_format"):
        mock = mock_server(error_rate=0.15, keep_requests=True)
        out = tmp_path / f"{field}.json"
        assert bench(mock.url, qwen3_path, out, "--structured-share", "0.6", "--structured-kind", "json",
                     "--structured-field", field, "--seed", "3", "--max-concurrency", "1") == 0
        got, truth = structured(out), constrained_truth(mock)
        assert got["field"] == field
        answered = [r for r in truth if r.finish != "http500"]
        assert got["failed"] == len(truth) - len(answered) and got["total"] == len(answered)
        assert {rid for rid, _, ok in got["grades"] if ok} == {r.request_id for r in answered if r.honoured}
        got["grades"] = [[rid.rsplit("-", 1)[1], kind, ok] for rid, kind, ok in got["grades"]]  # the run's own prefix
        runs[field] = {k: v for k, v in got.items() if k != "field"}
    assert runs["structured_outputs"]["cut"] and runs["structured_outputs"]["failed"]
    assert runs["response_format"] == runs["structured_outputs"]  # same requests, same answers, same counts


def test_a_server_that_ignores_response_format_is_named(mock_server, qwen3_path, tmp_path):
    mock = mock_server(ignore_constraints=True)
    out = tmp_path / "r.json"
    assert bench(mock.url, qwen3_path, out, "--structured-share", "1", *PORTABLE, "--custom-output-len", "16") == 0
    got = structured(out)
    assert (got["valid"], got["total"], got["verdict"]) == (0, N, "ignored")
    assert len(constrained_truth(mock)) == N and not any(r.honoured for r in constrained_truth(mock))


@pytest.mark.parametrize("kind, said", [
    (("--structured-kind", "regex"), "--structured-field response_format carries JSON schemas only: not with "
                                     "--structured-kind regex; give --structured-kind json"),
    (("--structured-kind", "choice"), "not with --structured-kind choice;"),
    ((), "not with --structured-kind mix (the default);"),
])
def test_response_format_refuses_regex_and_choice_in_one_line(kind, said, mock_server, qwen3_path, tmp_path, capsys):
    mock = mock_server(keep_requests=True)
    assert bench(mock.url, qwen3_path, tmp_path / "r.json", "--structured-share", "0.5", *kind,
                 "--structured-field", "response_format") == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert mock.truth().bodies("/v1/completions") == []  # refused before anything was sent


def test_an_unknown_field_is_one_line(mock_server, qwen3_path, tmp_path, capsys):
    assert bench(mock_server().url, qwen3_path, tmp_path / "r.json", "--structured-share", "0.5",
                 "--structured-field", "guided_json") == 2
    err = capsys.readouterr().err
    assert "--structured-field 'guided_json': choose from structured_outputs, response_format" in err
    assert "Traceback" not in err
