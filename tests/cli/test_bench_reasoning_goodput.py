"""``servelab bench`` against the mock: reasoning TTFTs on the mock's known schedule, and
token goodput against what the mock says it sent."""

from __future__ import annotations

import json

import pytest

from servelab.cli.main import main
from servelab.mock import lateness_ns


def bench(mock, tok, tmp_path, *extra) -> tuple[dict, str]:
    rc = main(["bench", "--backend", "openai-chat", "--base-url", mock.url, "--model", "mock", "--tokenizer", tok,
               "--dataset-name", "random", "--random-input-len", "16", "--random-output-len", "8", "--disable-tqdm",
               "--save-result", "--result-dir", str(tmp_path), "--result-filename", "r.json", *extra])
    assert rc == 0
    return json.loads((tmp_path / "r.json").read_text()), ""


@pytest.mark.timing  # the client's TTFTs within 250 ms of the mock's writes
def test_reasoning_ttfts_follow_the_mock_schedule(mock_server, qwen3_path, tmp_path, capsys):
    # event j is due at admit + 30 ms + j * 5 ms; events 0-3 are reasoning, 4-7 the answer
    mock = mock_server(ttft_ms=30, itl_ms=5, reasoning_len=4)
    result, _ = bench(mock, qwen3_path, tmp_path, "--num-prompts", "4", "--metric-percentiles", "50,99")
    out = capsys.readouterr().out
    section = result["servelab"]["reasoning"]
    assert section["requests"] == section["answered"] == 4
    records = [json.loads(x) for x in open(result["servelab"]["records_file"])]
    truth = mock.truth().by_id()
    assert sorted(truth) == sorted(r["request_id"] for r in records)
    for r in records:
        sent = truth[r["request_id"]]
        assert len(r["token_ms"]) == len(sent.event_ns) == 8
        # the mock writes on schedule, never early
        assert all(late >= 0 for late in lateness_ns(sent, 30, 5))
        # reasoning begins at the first event, the answer at event reasoning_len (4), exactly
        assert r["ttft_reasoning_ms"] == pytest.approx(r["token_ms"][0] - r["sent_ms"], abs=1e-3)
        assert r["ttft_answer_ms"] == pytest.approx(r["token_ms"][4] - r["sent_ms"], abs=1e-3)
        # the client sent before the mock read it and read after the mock wrote: never shorter
        # than the mock's own truth; the mock shares this process (and its GIL), so allow the
        # client's delivery lag a loose bound only (a unit or instant mix-up is far beyond it)
        for key, j in (("ttft_reasoning_ms", 0), ("ttft_answer_ms", 4)):
            written_ms = (sent.event_ns[j] - sent.admit_ns) / 1e6
            assert written_ms <= r[key] < written_ms + 250
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    assert section["ttft_reasoning_ms"]["mean"] == pytest.approx(mean([r["ttft_reasoning_ms"] for r in records]))
    assert section["ttft_answer_ms"]["mean"] == pytest.approx(mean([r["ttft_answer_ms"] for r in records]))
    assert section["reasoning_time_ms"]["mean"] == pytest.approx(
        mean([r["ttft_answer_ms"] - r["ttft_reasoning_ms"] for r in records]))
    assert result["mean_ttft_ms"] == section["ttft_reasoning_ms"]["mean"]  # TTFT: the first of either
    answer = section["ttft_answer_ms"]
    assert f"servelab: time to first answer token (ms): mean {answer['mean']:.2f}, median {answer['median']:.2f}, " \
           f"p50 {answer['p50']:.2f} · p99 {answer['p99']:.2f}" in out


def test_no_reasoning_no_keys_no_lines(mock_server, qwen3_path, tmp_path, capsys):
    mock = mock_server(ttft_ms=1)
    result, _ = bench(mock, qwen3_path, tmp_path, "--num-prompts", "2")
    assert "reasoning" not in result["servelab"] and "goodput" not in result["servelab"]
    assert "servelab: reasoning" not in capsys.readouterr().out
    records = [json.loads(x) for x in open(result["servelab"]["records_file"])]
    assert not any("ttft_answer_ms" in r or "turn" in r for r in records)


@pytest.mark.timing  # at least one reply within an E2EL of 110 ms of wall time
def test_token_goodput_counts_the_tokens_of_requests_within_the_slo(mock_server, qwen3_path, tmp_path, capsys):
    # E2EL is due at 5 ms + (n - 1) * 10 ms for an n-token reply: a reply of 12 or more tokens
    # (115 ms on) is never within 110 ms, as the mock is never early; a shorter one is within
    # it unless it came late, so the good ones are those whose measured E2EL is within it
    mock = mock_server(ttft_ms=5, itl_ms=10, output_len=(2, 20), seed=4)
    result, _ = bench(mock, qwen3_path, tmp_path, "--num-prompts", "12", "--goodput", "e2el:110", "ttft:1000")
    section = result["servelab"]["goodput"]
    planned = {r.request_id: r.planned_tokens for r in mock.truth().requests}
    records = [json.loads(x) for x in open(result["servelab"]["records_file"])]
    assert len(records) == 12 and all(r["error"] is None for r in records)
    assert {r["request_id"]: r["output_tokens"] for r in records} == planned
    e2el_ok = [r for r in records if r["e2el_ms"] <= 110]
    ttft_ok = [r for r in records if r["ttft_ms"] <= 1000]
    good = [r["output_tokens"] for r in e2el_ok if r["ttft_ms"] <= 1000]
    assert not any(r["output_tokens"] >= 12 for r in e2el_ok)
    assert 0 < len(good) and any(n >= 12 for n in planned.values())
    assert section["good_requests"] == len(good) == round(result["request_goodput"] * result["duration"])
    assert section["output_token_goodput"] * result["duration"] == pytest.approx(sum(good), rel=1e-12)
    assert section["attainment"] == {"e2el": len(e2el_ok) / 12, "ttft": len(ttft_ok) / 12, "all": len(good) / 12}
    assert "servelab: goodput (e2el <= 110 ms, ttft <= 1000 ms):" in capsys.readouterr().out
