"""``servelab bench`` against the mock: reasoning TTFTs on the mock's known schedule, and
token goodput against what the mock says it sent."""

from __future__ import annotations

import json

from servelab.cli.main import main


def bench(mock, tok, tmp_path, *extra) -> tuple[dict, str]:
    rc = main(["bench", "--backend", "openai-chat", "--base-url", mock.url, "--model", "mock", "--tokenizer", tok,
               "--dataset-name", "random", "--random-input-len", "16", "--random-output-len", "8", "--disable-tqdm",
               "--save-result", "--result-dir", str(tmp_path), "--result-filename", "r.json", *extra])
    assert rc == 0
    return json.loads((tmp_path / "r.json").read_text()), ""


def test_reasoning_ttfts_follow_the_mock_schedule(mock_server, qwen3_path, tmp_path, capsys):
    # event j is written at admit + 30 ms + j * 5 ms; events 0-3 are reasoning, 4-7 the answer
    mock = mock_server(ttft_ms=30, itl_ms=5, reasoning_len=4)
    result, _ = bench(mock, qwen3_path, tmp_path, "--num-prompts", "4", "--metric-percentiles", "50,99")
    out = capsys.readouterr().out
    section = result["servelab"]["reasoning"]
    assert section["requests"] == section["answered"] == 4
    # the mock shares this process (and its GIL): allow it some lateness, never earliness
    assert 30 <= section["ttft_reasoning_ms"]["mean"] < 45
    assert 50 <= section["ttft_answer_ms"]["mean"] < 65
    assert 18 <= section["reasoning_time_ms"]["mean"] <= 25
    assert result["mean_ttft_ms"] == section["ttft_reasoning_ms"]["mean"]  # TTFT: the first of either
    answer = section["ttft_answer_ms"]
    assert f"servelab: time to first answer token (ms): mean {answer['mean']:.2f}, median {answer['median']:.2f}, " \
           f"p50 {answer['p50']:.2f} · p99 {answer['p99']:.2f}" in out
    records = [json.loads(x) for x in open(result["servelab"]["records_file"])]
    assert all(50 <= r["ttft_answer_ms"] < 65 for r in records)


def test_no_reasoning_no_keys_no_lines(mock_server, qwen3_path, tmp_path, capsys):
    mock = mock_server(ttft_ms=1)
    result, _ = bench(mock, qwen3_path, tmp_path, "--num-prompts", "2")
    assert "reasoning" not in result["servelab"] and "goodput" not in result["servelab"]
    assert "servelab: reasoning" not in capsys.readouterr().out
    records = [json.loads(x) for x in open(result["servelab"]["records_file"])]
    assert not any("ttft_answer_ms" in r or "turn" in r for r in records)


def test_token_goodput_counts_the_tokens_of_requests_within_the_slo(mock_server, qwen3_path, tmp_path, capsys):
    # E2EL = 5 ms + (n - 1) * 10 ms for an n-token reply: within 110 ms exactly when n <= 11
    mock = mock_server(ttft_ms=5, itl_ms=10, output_len=(2, 20), seed=4)
    result, _ = bench(mock, qwen3_path, tmp_path, "--num-prompts", "12", "--goodput", "e2el:110", "ttft:1000")
    section = result["servelab"]["goodput"]
    planned = [r.planned_tokens for r in mock.truth().requests]
    good = [n for n in planned if n <= 11]
    assert 0 < len(good) < len(planned)
    assert section["good_requests"] == len(good) == round(result["request_goodput"] * result["duration"])
    assert section["output_token_goodput"] * result["duration"] == sum(good)
    assert section["attainment"] == {"e2el": len(good) / 12, "ttft": 1.0, "all": len(good) / 12}
    assert "servelab: goodput (e2el <= 110 ms, ttft <= 1000 ms):" in capsys.readouterr().out
