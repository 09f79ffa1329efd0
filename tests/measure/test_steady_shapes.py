"""The steady state of a real run, per load shape, against the mock (a stand-in engine
with ``max_open`` slots streaming at a fixed pace: a constant token rate once they are
all busy). The ramp test is the issue's done-when: the plateau's output tok/s equals
what the engine delivered there (its own log) within 1 %, the engine was saturated for
the whole plateau, and the whole-run figure is lower."""

from __future__ import annotations

import json

import pytest

from servelab.cli.main import main

SLOTS, TOKENS, ITL_MS = 4, 32, 4.0
CONFIGURED = SLOTS * TOKENS / (TOKENS * ITL_MS / 1000)  # each slot: TOKENS tokens per (ttft + 31 gaps) = 32 ITLs


def bench(url: str, tok: str, out, *extra: str) -> dict:
    argv = ["bench", "--backend", "vllm", "--base-url", url, "--model", "mock", "--tokenizer", tok,
            "--dataset-name", "random", "--random-input-len", "16", "--random-output-len", str(TOKENS),
            "--disable-tqdm", "--no-telemetry", "--save-result", "--result-dir", str(out),
            "--result-filename", "r.json", *extra]
    assert main(argv) == 0
    return json.loads((out / "r.json").read_text())


def engine(mock_server):
    return mock_server(ttft_ms=ITL_MS, itl_ms=ITL_MS, output_len=TOKENS, max_open=SLOTS)


# the mock's real-time pace within 3 % and 30 %, slots busy 99 % (failed once in ~6 runs beside other
# suites: bfb73a6)
@pytest.mark.timing
def test_a_linear_ramp_through_the_engines_rate_finds_its_level(mock_server, qwen3_path, tmp_path, capsys):
    mock = engine(mock_server)
    result = bench(mock.url, qwen3_path, tmp_path, "--num-prompts", "360", "--ramp-up-strategy", "linear",
                   "--ramp-up-start-rps", "8", "--ramp-up-end-rps", "120")
    s = result["servelab"]["steady_state"]
    assert s["shape"] == "ramp" and s["plateau"], s
    truth = mock.truth()
    t0 = result["servelab"]["t0_perf_ns"]
    start, end = t0 + int(s["start_s"] * 1e9), t0 + int(s["end_s"] * 1e9)
    sent = sum(k for r in truth.requests for t, k in zip(r.event_ns, r.event_tokens) if start <= t < end)
    delivered = sent / ((end - start) / 1e9)
    assert abs(s["output_tok_s"] / delivered - 1) < 0.01, (s["output_tok_s"], delivered)
    held = busy(truth, start, end)
    assert held > 0.99, f"the plateau reaches outside the engine's saturated stretch: slots busy {held:.2%}"
    # the stand-in held its slots' pace: each slot streams a request's TOKENS in its admit → end
    # (the configured 32 ITLs, plus however late a busy machine woke the mock), then the next
    # one at once; so about the configured rate, and within a few % of the requests' own pace
    assert abs(delivered / paced(truth, start, end) - 1) < 0.03, (delivered, paced(truth, start, end))
    assert abs(delivered / CONFIGURED - 1) < 0.30, (delivered, CONFIGURED)
    assert result["output_throughput"] < 0.9 * s["output_tok_s"], (result["output_throughput"], s)
    out = capsys.readouterr().out
    assert f"{s['output_tok_s']:.2f} output tok/s" in out and "servelab: steady state t0+" in out


def paced(truth, start: int, end: int) -> float:
    """Output tok/s of SLOTS slots, each streaming one request after another at the mean
    admit → end of the requests served wholly within [start, end)."""
    took = [r.end_ns - r.admit_ns for r in truth.requests if r.admit_ns and r.end_ns and start <= r.admit_ns
            and r.end_ns <= end]
    return SLOTS * TOKENS / (sum(took) / len(took) / 1e9)


def busy(truth, start: int, end: int) -> float:
    """The share of the engine's slot-time in [start, end) that a request held: 1.0 at its cap."""
    edges = sorted([(max(r.admit_ns, start), 1) for r in truth.requests if r.admit_ns and r.end_ns]
                   + [(max(r.end_ns, start), -1) for r in truth.requests if r.admit_ns and r.end_ns])
    held, open_, at = 0, 0, start
    for t, step in edges:
        t = min(t, end)
        held += min(open_, SLOTS) * (t - at)
        open_, at = open_ + step, t
    return (held + min(open_, SLOTS) * (end - at)) / (SLOTS * (end - start))


@pytest.mark.timing  # slots busy 99 % of a real-time plateau, its rate within 2 % of the whole run's
def test_a_closed_loop_plateau_is_the_cap_at_work(mock_server, qwen3_path, tmp_path):
    mock = engine(mock_server)
    result = bench(mock.url, qwen3_path, tmp_path, "--num-prompts", "64", "--max-concurrency", "8")
    s = result["servelab"]["steady_state"]
    assert s["shape"] == "closed" and s["plateau"]
    assert 0 < s["start_s"] < s["end_s"] <= result["duration"]
    assert s["requests"] + s["requests_cut"] == 64 and s["output_tokens"] + s["tokens_cut"] == 64 * TOKENS
    # The cap at work: the plateau is what the engine delivered there, with its slots full. Its
    # rate against the whole run's is no test here: 64 requests through 4 slots is 16 full rounds,
    # so the run has no drain to lower the whole-run figure (the two differed by 0.05 % in CI).
    truth = mock.truth()
    t0 = result["servelab"]["t0_perf_ns"]
    start, end = t0 + int(s["start_s"] * 1e9), t0 + int(s["end_s"] * 1e9)
    sent = sum(k for r in truth.requests for t, k in zip(r.event_ns, r.event_tokens) if start <= t < end)
    assert abs(s["output_tok_s"] / (sent / ((end - start) / 1e9)) - 1) < 0.01, (s["output_tok_s"], sent)
    assert busy(truth, start, end) > 0.99
    assert s["output_tok_s"] > 0.98 * result["output_throughput"]
    assert set(s["latency_ms"]) == {"ttft", "tpot", "e2el"} and s["latency_ms"]["ttft"]["p99"] > 0


def test_a_finite_rate_below_the_engine_is_its_rate(mock_server, qwen3_path, tmp_path):
    mock = engine(mock_server)
    result = bench(mock.url, qwen3_path, tmp_path, "--num-prompts", "40", "--request-rate", "20")
    s = result["servelab"]["steady_state"]
    assert s["shape"] == "rate" and s["plateau"] and s["rule"].startswith("finite request rate")
    assert 0.5 * 20 < s["req_s"] < 1.5 * 20  # Poisson arrivals at 20/s, well under the engine's ~31/s


def test_everything_at_t0_has_no_plateau_and_says_why(mock_server, qwen3_path, tmp_path, capsys):
    mock = engine(mock_server)
    result = bench(mock.url, qwen3_path, tmp_path, "--num-prompts", "16")
    s = result["servelab"]["steady_state"]
    assert s == {"shape": "burst", "plateau": False, "why": s["why"]} and "every request at t0" in s["why"]
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("servelab: steady state")]
    assert lines == [f"servelab: steady state: none — {s['why']}"] and not any(c.isdigit() for c in lines[0].replace("t0", ""))
