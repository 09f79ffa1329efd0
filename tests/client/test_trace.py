"""``--traceparent``: a valid W3C traceparent on each request, its trace id in the record, checked
against what the mock received."""

import json
import re

from servelab.cli.main import main
from servelab.client import trace

W3C = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-01")


def test_ids_are_valid_derived_and_distinct():
    header = trace.traceparent(0, "r1")
    found = W3C.fullmatch(header)
    assert found and found.group(1) == trace.trace_id(0, "r1") and found.group(1) != "0" * 32
    assert trace.traceparent(0, "r1") == header  # derived, not drawn
    assert len({trace.trace_id(s, r) for s in (0, 1) for r in ("r1", "r2")}) == 4


def bench(url, tok, tmp_path, *extra):
    return ["bench", "--backend", "vllm", "--base-url", url, "--model", "mock", "--tokenizer", tok,
            "--dataset-name", "random", "--random-input-len", "16", "--random-output-len", "4", "--num-prompts", "6",
            "--disable-tqdm", "--no-telemetry", "--save-result", "--result-dir", str(tmp_path),
            "--result-filename", "r.json", *extra]


def received(mock) -> dict[str, str]:
    """request id -> the traceparent the mock received with it ("" if none)."""
    out = {}
    for r in mock.truth().received:
        if r["path"] == "/v1/completions":
            headers = {k.lower(): v for k, v in r["headers"].items()}
            out[headers["x-request-id"]] = headers.get("traceparent", "")
    return out


def test_each_request_carries_one_and_its_record_keeps_the_trace_id(mock_server, qwen3_path, tmp_path):
    mock = mock_server(keep_requests=True)
    assert main(bench(mock.url, qwen3_path, tmp_path, "--traceparent")) == 0
    sent = received(mock)
    records = [json.loads(line) for line in (tmp_path / "r.records.jsonl").read_text().splitlines()]
    assert len(records) == len(sent) == 6
    for rec in records:
        found = W3C.fullmatch(sent[rec["request_id"]])
        assert found and found.group(1) == rec["trace_id"]
    assert len({rec["trace_id"] for rec in records}) == 6


def test_without_the_flag_nothing_is_sent_or_kept(mock_server, qwen3_path, tmp_path):
    mock = mock_server(keep_requests=True)
    assert main(bench(mock.url, qwen3_path, tmp_path)) == 0
    assert set(received(mock).values()) == {""}
    assert all("trace_id" not in json.loads(line) for line in (tmp_path / "r.records.jsonl").read_text().splitlines())


def test_multi_turn_turns_carry_one_each_too(mock_server, qwen3_path, tmp_path):
    mock = mock_server(keep_requests=True)
    path = tmp_path / "conversations.jsonl"
    path.write_text("".join(json.dumps({"turns": t}) + "\n" for t in (["a one", "a two"], ["b one"])))
    assert main(["bench", "--backend", "openai-chat", "--base-url", mock.url, "--model", "mock", "--tokenizer",
                 qwen3_path, "--dataset-name", "custom", "--dataset-path", str(path), "--num-prompts", "2",
                 "--custom-output-len", "4", "--multi-turn", "--disable-tqdm", "--no-telemetry", "--save-result",
                 "--result-dir", str(tmp_path), "--result-filename", "r.json", "--traceparent"]) == 0
    sent = {}
    for r in mock.truth().received:
        if r["path"] == "/v1/chat/completions":
            h = {k.lower(): v for k, v in r["headers"].items()}
            sent[h["x-request-id"]] = h.get("traceparent", "")
    records = [json.loads(line) for line in (tmp_path / "r.records.jsonl").read_text().splitlines()]
    assert len(records) == len(sent) == 3
    assert all(W3C.fullmatch(sent[r["request_id"]]).group(1) == r["trace_id"] for r in records)
