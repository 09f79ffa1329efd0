"""The ``sim`` engine: a real process serving on the simulated scheduler's timing, read by
servelab as a vLLM (memory lines, /metrics), and matching the fast mode within noise."""

import json
import statistics
import urllib.request

import pytest

from servelab.engines import EngineSpec
from servelab.engines.engine import start_engine
from servelab.flags.bench_serve import parse_bench_spec
from servelab.measure.run import execute
from net_helpers import free_port

# Steps of a few ms, so the server's timer jitter (~0.1 ms) is small beside them.
STEP = ["step-overhead-ms", "4", "step-per-seq-ms", "0.2", "step-per-token-ms", "0.01"]
LOAD = ["--dataset-name", "random", "--random-input-len", "200", "--random-output-len", "32",
        "--num-prompts", "64", "--max-concurrency", "32", "--disable-tqdm", "--seed", "3"]
# Fast mode vs real time, on the server's own stamps: it writes each token a little after its
# step's end (timer wake-up, the write) and its step clock never runs early or slips.
TOLERANCE = 0.10


def flags(prefix: str, max_num_seqs: int) -> list[str]:
    pairs = ["max-num-seqs", str(max_num_seqs), *STEP]
    return [f"--{prefix}{x}" if i % 2 == 0 else x for i, x in enumerate(pairs)]


@pytest.fixture
def sim_engine(tmp_path, qwen3_path):
    engines = []

    def start(max_num_seqs: int, *extra: str):
        spec = EngineSpec(name="sim", kind="sim", port=free_port(), ready_timeout_s=30,
                          args=(*flags("", max_num_seqs), "--tokenizer", qwen3_path, *extra))
        engine = start_engine(spec, tmp_path / f"engine{len(engines)}", progress=False)
        engines.append(engine)
        return engine

    yield start
    for e in engines:
        e.stop()


def bench(qwen3_path, *extra):
    return run(qwen3_path, *extra).result


def run(qwen3_path, *extra):
    return execute(parse_bench_spec(["--tokenizer", qwen3_path, *LOAD, *extra]))


def engine_side(truth: dict) -> dict:
    """The served run's figures on the sim server's own stamps (ns, perf_counter_ns): from
    when it read each request to when it wrote each token — the engine's timeline, which the
    fast mode computes, without the client's send and read delays a busy machine stretches."""
    reqs = truth["requests"]
    first_recv, last_write = min(r["recv_ns"] for r in reqs), max(r["event_ns"][-1] for r in reqs)
    duration_s = (last_write - first_recv) / 1e9
    tpots = [(r["event_ns"][-1] - r["event_ns"][0]) / (len(r["event_ns"]) - 1) / 1e6 for r in reqs]
    return {"output_throughput": sum(r["output_tokens"] for r in reqs) / duration_s,
            "mean_ttft_ms": statistics.mean((r["event_ns"][0] - r["recv_ns"]) / 1e6 for r in reqs),
            "median_tpot_ms": statistics.median(tpots), "duration": duration_s,
            "first_recv_ns": first_recv, "last_write_ns": last_write}


@pytest.mark.timing  # the real-time server's stamps within 10 % of the fast mode's
def test_fast_mode_matches_the_real_time_server(sim_engine, qwen3_path):
    engine = sim_engine(8)
    outcome = run(qwen3_path, "--base-url", engine.base_url, "--model", "sim")
    served, records = outcome.result, outcome.tally.records()
    fast = bench(qwen3_path, "--simulate", *flags("sim-", 8))
    assert served["completed"] == fast["completed"] == 64
    assert served["total_output_tokens"] == fast["total_output_tokens"]
    truth = json.loads(urllib.request.urlopen(engine.base_url + "/_servelab/truth", timeout=10).read())
    on_engine = engine_side(truth)
    for key in ("output_throughput", "mean_ttft_ms", "median_tpot_ms", "duration"):
        assert on_engine[key] == pytest.approx(fast[key], rel=TOLERANCE), key
    # The client sends before the server reads and reads after it writes: its figures are never
    # shorter than the server's, and longer by no more than the delays measured between the two
    by_id = {r["request_id"]: r for r in truth["requests"]}
    sent = [by_id[r.request_id] for r in records]
    assert all(r.sent_ns <= t["recv_ns"] and all(a >= b for a, b in zip(r.token_ns, t["event_ns"]))
               for r, t in zip(records, sent))
    lag_ms = statistics.mean((t["recv_ns"] - r.sent_ns + r.token_ns[0] - t["event_ns"][0]) / 1e6
                             for r, t in zip(records, sent))
    assert on_engine["mean_ttft_ms"] <= served["mean_ttft_ms"] <= fast["mean_ttft_ms"] * (1 + TOLERANCE) + lag_ms
    run_ns = outcome.run.outcome
    lag_s = (on_engine["first_recv_ns"] - run_ns.t0_ns + run_ns.end_ns - on_engine["last_write_ns"]) / 1e9
    assert on_engine["duration"] <= served["duration"] <= fast["duration"] * (1 + TOLERANCE) + lag_s
    assert served["servelab"]["simulated"]["mode"] == "real-time"


def test_metrics_use_vllm_s_names_and_count_the_run(sim_engine, qwen3_path):
    engine = sim_engine(8)
    bench(qwen3_path, "--base-url", engine.base_url, "--model", "sim", "--no-telemetry")
    text = urllib.request.urlopen(engine.base_url + "/metrics", timeout=10).read().decode()
    values = {line.split("{")[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
              if line.startswith("vllm:") and "{" in line}
    assert values["vllm:generation_tokens_total"] == 64 * 32
    assert values["vllm:prompt_tokens_total"] == 64 * 200
    assert values["vllm:num_requests_running"] == values["vllm:num_requests_waiting"] == 0
    for name in ("vllm:kv_cache_usage_perc", "vllm:num_preemptions_total", "vllm:prefix_cache_queries_total",
                 "vllm:prefix_cache_hits_total"):
        assert name in values


def test_diagnose_on_a_sim_engine_with_max_num_seqs_2_at_32_streams_says_scheduler_cap(sim_engine, qwen3_path):
    engine = sim_engine(2)
    result = bench(qwen3_path, "--base-url", engine.base_url, "--model", "sim")
    assert result["servelab"]["diagnosis"]["verdict"] == "scheduler-cap"


def post(url: str, body: dict) -> str:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=10).read().decode()


def test_chat_streams_the_role_delta_first_and_plain_requests_get_one_answer(sim_engine):
    engine = sim_engine(8)
    chat = post(engine.base_url + "/v1/chat/completions",
                {"model": "sim", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "stream": True})
    events = [json.loads(line[6:]) for line in chat.splitlines() if line.startswith("data: {")]
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [e["choices"][0]["delta"].get("content") for e in events[1:]] == [" the", " quick", " brown"]
    plain = json.loads(post(engine.base_url + "/v1/completions", {"model": "sim", "prompt": "hi", "max_tokens": 4}))
    assert plain["usage"]["completion_tokens"] == 4 and plain["choices"][0]["finish_reason"] == "length"


def test_a_request_larger_than_the_kv_cache_is_an_error_and_the_server_goes_on(sim_engine):
    engine = sim_engine(8, "--kv-cache-tokens", "64")
    stream = post(engine.base_url + "/v1/completions",
                  {"model": "sim", "prompt": "word " * 100, "max_tokens": 3, "stream": True})
    assert "exceed the simulated KV cache (64 tokens)" in stream and "data: [DONE]" in stream
    small = json.loads(post(engine.base_url + "/v1/completions", {"model": "sim", "prompt": "hi", "max_tokens": 2}))
    assert small["usage"]["completion_tokens"] == 2


@pytest.mark.timing  # the real-time server's stamps within 10 % of the fast mode's
def test_the_api_servers_per_request_cost_holds_requests_back_as_in_the_fast_mode(sim_engine, qwen3_path):
    engine = sim_engine(8, "--step-request-ms", "30")
    outcome = run(qwen3_path, "--base-url", engine.base_url, "--model", "sim")
    fast = bench(qwen3_path, "--simulate", *flags("sim-", 8), "--sim-step-request-ms", "30")
    plain = bench(qwen3_path, "--simulate", *flags("sim-", 8))
    truth = json.loads(urllib.request.urlopen(engine.base_url + "/_servelab/truth", timeout=10).read())
    on_engine = engine_side(truth)
    assert outcome.result["completed"] == fast["completed"] == 64
    # each request is 30 ms later to the engine; with 24 queued there, most of that wait was spent anyway
    assert plain["mean_ttft_ms"] + 5 < fast["mean_ttft_ms"] <= plain["mean_ttft_ms"] + 30.5
    for key in ("output_throughput", "mean_ttft_ms", "median_tpot_ms"):
        assert on_engine[key] == pytest.approx(fast[key], rel=TOLERANCE), key


@pytest.mark.timing  # the client must leave within the server's 300 ms hold (a 0.1 s sleep)
def test_a_client_that_leaves_while_the_api_server_holds_its_request_never_reaches_the_engine(sim_engine):
    import socket
    import time

    engine = sim_engine(8, "--step-request-ms", "300")
    host, port = engine.base_url.removeprefix("http://").split(":")
    body = json.dumps({"model": "sim", "prompt": "hi", "max_tokens": 3, "stream": True}).encode()
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        time.sleep(0.1)  # gone well before its 300 ms in the API server are up
    time.sleep(0.5)
    truth = json.loads(urllib.request.urlopen(engine.base_url + "/_servelab/truth", timeout=10).read())
    [left] = truth["requests"]
    assert left["finish"] == "disconnect" and left["admit_ns"] is None and left["event_ns"] == []
    text = urllib.request.urlopen(engine.base_url + "/metrics", timeout=10).read().decode()
    values = {line.split("{")[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
              if line.startswith("vllm:num_requests") and "{" in line}
    assert values["vllm:num_requests_running"] == values["vllm:num_requests_waiting"] == 0
    after = json.loads(post(engine.base_url + "/v1/completions", {"model": "sim", "prompt": "hi", "max_tokens": 2}))
    assert after["usage"]["completion_tokens"] == 2
