"""The vLLM bench flags servelab implements, checked by what the mock server received
(bodies, headers, paths) and what the run wrote — not only that they parse."""

from __future__ import annotations

import json

import numpy as np
import pytest

from servelab.cli.main import main
from servelab.loadgen.arrivals import arrival_offsets_ns, ramp_rates, rate_steps


def bench(url, tok, *extra):
    return ["bench", "--backend", "vllm", "--base-url", url, "--model", "mock", "--tokenizer", tok,
            "--dataset-name", "random", "--random-input-len", "16", "--random-output-len", "4",
            "--num-prompts", "6", "--disable-tqdm", "--no-telemetry", *extra]


@pytest.fixture
def mock(mock_server):
    return mock_server(keep_requests=True)


def completions(mock) -> list[dict]:
    return mock.truth().bodies("/v1/completions")


def test_sampling_flags_and_logprobs_are_in_every_completions_body(mock, qwen3_path):
    flags = {"--temperature": 0.0, "--top-p": 0.9, "--top-k": 5, "--min-p": 0.1, "--frequency-penalty": 0.5,
             "--presence-penalty": 0.2, "--repetition-penalty": 1.3}
    extra = [x for k, v in flags.items() for x in (k, str(v))]
    assert main(bench(mock.url, qwen3_path, *extra, "--logprobs", "2")) == 0
    bodies = completions(mock)
    assert len(bodies) == 6
    for body in bodies:
        assert {k: body[k] for k in ("temperature", "top_p", "top_k", "min_p", "frequency_penalty",
                                     "presence_penalty", "repetition_penalty")} == \
               {"temperature": 0.0, "top_p": 0.9, "top_k": 5, "min_p": 0.1, "frequency_penalty": 0.5,
                "presence_penalty": 0.2, "repetition_penalty": 1.3}
        assert body["logprobs"] == 2 and body["max_tokens"] == 4 and body["ignore_eos"] is True


def test_without_sampling_flags_the_body_is_vllms_default(mock, qwen3_path):
    assert main(bench(mock.url, qwen3_path, "--num-prompts", "2")) == 0
    body = completions(mock)[0]
    assert body["logprobs"] is None and body["repetition_penalty"] == 1.0 and "temperature" not in body


def test_chat_content_is_a_list_of_text_parts_and_logprobs_stay_out(mock, qwen3_path, capsys):
    args = bench(mock.url, qwen3_path, "--logprobs", "1", "--num-prompts", "2")
    args[args.index("vllm")] = "openai-chat"
    assert main(args) == 0
    bodies = mock.truth().bodies("/v1/chat/completions")
    assert len(bodies) == 2
    for body in bodies:
        [message] = body["messages"]
        assert message["role"] == "user" and [p["type"] for p in message["content"]] == ["text"]
        assert "logprobs" not in body and body["max_completion_tokens"] == 4
    assert "--logprobs is not sent with --backend openai-chat" in capsys.readouterr().err


@pytest.mark.parametrize("assignment", ["round-robin", "random"])
def test_lora_modules_name_each_requests_model(assignment, mock, qwen3_path):
    args = bench(mock.url, qwen3_path, "--lora-modules", "a1", "a2", "a3", "--lora-assignment", assignment,
                 "--num-prompts", "12", "--max-concurrency", "1", "--seed", "4")
    assert main(args) == 0
    first = [b["model"] for b in completions(mock)]  # one at a time: arrival order is request order
    if assignment == "round-robin":
        assert first == ["a1", "a2", "a3"] * 4
    else:
        assert set(first) <= {"a1", "a2", "a3"} and len(set(first)) > 1
        mock.reset_truth()
        assert main(args) == 0
        assert [b["model"] for b in completions(mock)] == first  # the seed names the assignment


def test_zipf_assignment_is_what_the_server_received_and_the_result_counts_it(mock, qwen3_path, tmp_path):
    args = bench(mock.url, qwen3_path, "--lora-modules", "hot", "warm", "cold", "--lora-assignment", "zipf:2",
                 "--num-prompts", "40", "--seed", "2", "--save-result", "--result-dir", str(tmp_path),
                 "--result-filename", "r.json")
    assert main(args) == 0
    received = [b["model"] for b in completions(mock)]
    lora = json.loads((tmp_path / "r.json").read_text())["servelab"]["lora"]
    assert lora["assignment"] == "zipf:2" and list(lora["requests"]) == ["hot", "warm", "cold"]
    assert lora["requests"] == {m: received.count(m) for m in ("hot", "warm", "cold")}
    assert lora["requests"]["hot"] > lora["requests"]["warm"] > 0  # p = 0.73, 0.18, 0.08 over 40 draws


def test_distinct_adapters_need_one_per_request(mock, qwen3_path, capsys):
    assert main(bench(mock.url, qwen3_path, "--lora-modules", "a", "b", "--lora-assignment", "distinct")) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("--lora-assignment distinct gives each request its own adapter: --num-prompts 6 "
                        "needs at least 6 names in --lora-modules (given 2)") and "\n" not in err
    assert not completions(mock)  # refused before any request


def test_api_key_is_sent_as_bearer_and_written_nowhere(mock, qwen3_path, tmp_path, monkeypatch, capsys):
    secret = "sk-servelab-test-9f8e7d"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    args = bench(mock.url, qwen3_path, "--save-result", "--save-detailed", "--result-dir", str(tmp_path),
                 "--profile", "--plot-timeline", "--num-warmups", "1")
    args.remove("--no-telemetry")
    args[args.index("--model"):args.index("--model") + 2] = []  # the model comes from /v1/models, with the key
    assert main(args) == 0
    received = mock.truth().received
    assert {r["path"] for r in received} >= {"/v1/models", "/v1/completions", "/start_profile", "/stop_profile"}
    assert all(r["headers"].get("authorization") == f"Bearer {secret}" for r in received
               if r["path"] != "/metrics")
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(written) >= 3  # result, records, telemetry timeline, request timeline
    assert not [p for p in written if secret in p.read_text(errors="replace")]
    out = capsys.readouterr()
    assert secret not in out.out and secret not in out.err


def test_header_flag_overrides_the_api_key(mock, qwen3_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    assert main(bench(mock.url, qwen3_path, "--num-prompts", "1", "--header", "Authorization=Bearer mine")) == 0
    [req] = [r for r in mock.truth().received if r["path"] == "/v1/completions"]
    assert req["headers"]["authorization"] == "Bearer mine"


def test_header_values_are_sent_but_not_written(mock, qwen3_path, tmp_path, monkeypatch):
    monkeypatch.setattr("sys.argv", ["servelab", "bench", "--header", "Authorization=Bearer hdr-secret-1", "x-org=o"])
    args = bench(mock.url, qwen3_path, "--num-prompts", "1", "--header", "Authorization=Bearer hdr-secret-1",
                 "x-org=o", "--save-result", "--result-dir", str(tmp_path), "--result-filename", "r.json")
    assert main(args) == 0
    [req] = [r for r in mock.truth().received if r["path"] == "/v1/completions"]
    assert req["headers"]["authorization"] == "Bearer hdr-secret-1" and req["headers"]["x-org"] == "o"
    text = (tmp_path / "r.json").read_text()
    assert "hdr-secret-1" not in text
    provenance = json.loads(text)["servelab"]["provenance"]
    assert provenance["argv"][-2:] == ["Authorization=***", "x-org=***"]  # names kept, as vLLM's *** redaction
    assert provenance["flags"]["headers"] == [["Authorization", "***"], ["x-org", "***"]]


def test_default_model_sends_id_and_reports_root(mock_server, qwen3_path, tmp_path):
    mock = mock_server(keep_requests=True, model="alias", root="/models/served-path")
    args = bench(mock.url, qwen3_path, "--save-result", "--result-dir", str(tmp_path), "--result-filename", "r.json")
    args[args.index("--model"):args.index("--model") + 2] = []
    assert main(args) == 0
    assert {b["model"] for b in completions(mock)} == {"alias"}  # vLLM's model_name: the card's id
    assert json.loads((tmp_path / "r.json").read_text())["model_id"] == "/models/served-path"  # its root


def test_profile_brackets_the_measured_requests(mock, qwen3_path, capsys):
    assert main(bench(mock.url, qwen3_path, "--profile", "--num-warmups", "2")) == 0
    paths = [r["path"] for r in mock.truth().received]
    gen = [i for i, p in enumerate(paths) if p == "/v1/completions"]
    start, stop = paths.index("/start_profile"), paths.index("/stop_profile")
    assert gen[1] < start < gen[2] and stop > gen[-1]  # after the 2 warm-ups, after the last request
    out = capsys.readouterr().out
    assert "Profiler started" in out and "Profiler stopped" in out




def test_probe_requests_run_beside_the_load_and_are_reported(mock_server, qwen3_path, tmp_path, capsys):
    mock = mock_server(keep_requests=True, ttft_ms=20, itl_ms=10)
    args = bench(mock.url, qwen3_path, "--probe-request-rate", "50", "--num-prompts", "8",
                 "--max-concurrency", "2", "--save-result", "--result-dir", str(tmp_path), "--result-filename", "r.json")
    assert main(args) == 0
    probes = [b for b in completions(mock) if b["prompt"] == "Hi"]
    assert probes and all(b["max_tokens"] == 1 for b in probes)
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["probe_completed"] == len(probes) and result["probe_failed"] == 0
    assert result["completed"] == 8  # probes are not part of the run's counts
    assert 20 <= result["probe_median_e2el_ms"] <= result["probe_max_e2el_ms"]
    out = capsys.readouterr().out
    assert "-" * 18 + "Probe Requests" in out and "Probe requests completed:" in out


def test_ramp_rates_follow_vllms_formula():
    assert ramp_rates(5, "linear", 1, 5).tolist() == [1, 2, 3, 4, 5]
    assert np.allclose(ramp_rates(3, "exponential", 1, 4), [1, 2, 4])
    assert ramp_rates(1, "linear", 2, 9).tolist() == [2]
    offsets = arrival_offsets_ns(3, float("inf"), float("inf"), np.random.default_rng(0), ("exponential", 1, 4))
    assert offsets.tolist() == [1_000_000_000, 1_500_000_000, 1_750_000_000]  # gaps 1/rate_i, no rescale


def test_rate_steps_are_vllms_rps_change_events():
    # rates 1, 2.5, 4 (linear over 3): whole rps 1 at request 0; 2 at request 1; 3 and 4 at request 2
    assert rate_steps(ramp_rates(3, "linear", 1, 4), 1) == [(1, 0), (2, 1), (3, 2), (4, 2)]


def test_ramp_up_run_sends_on_the_ramp_and_names_the_file(mock, qwen3_path, tmp_path, capsys):
    args = bench(mock.url, qwen3_path, "--ramp-up-strategy", "linear", "--ramp-up-start-rps", "50",
                 "--ramp-up-end-rps", "200", "--burstiness", "inf", "--save-result", "--result-dir", str(tmp_path))
    assert main(args) == 0
    [path] = tmp_path.glob("vllm-ramp-up-linear-50qps-200qps-mock-*.json")
    result = json.loads(path.read_text())
    assert (result["ramp_up_strategy"], result["ramp_up_start_rps"], result["ramp_up_end_rps"]) == ("linear", 50, 200)
    assert [e["rps"] for e in result["rps_change_events"]] == list(range(50, 201))
    records = [json.loads(x) for x in open(result["servelab"]["records_file"])]
    intended = sorted(r["intended_send_ms"] for r in records)
    gaps = np.diff(intended)  # 6 requests, rates 50, 80, ..., 200: gaps 1000/rate ms
    assert np.allclose(gaps, [1000 / r for r in (80, 110, 140, 170, 200)], atol=0.01)
    assert "Will increase RPS from 50 to 200 RPS" in capsys.readouterr().out


def test_general_lengths_map_onto_the_dataset_flags(mock, qwen3_path, tmp_path):
    args = bench(mock.url, qwen3_path, "--input-len", "10", "--output-len", "3", "--save-result",
                 "--result-dir", str(tmp_path), "--result-filename", "r.json")
    assert main(args) == 0
    assert {b["max_tokens"] for b in completions(mock)} == {3}
    records = [json.loads(x) for x in open(tmp_path / "r.records.jsonl")]
    assert {r["expected_output_len"] for r in records} == {3}


def test_chat_template_kwargs_reach_the_template(mock, qwen3_path, tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": "Hello there"}\n')
    args = bench(mock.url, qwen3_path, "--dataset-name", "custom", "--dataset-path", str(data), "--num-prompts", "1",
                 "--chat-template-kwargs", '{"enable_thinking": false}')
    assert main(args) == 0
    [body] = completions(mock)
    assert body["prompt"].endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")  # Qwen3: thinking off
    mock.reset_truth()
    assert main(args[:-2]) == 0
    assert "<think>" not in completions(mock)[0]["prompt"]


def test_plots_are_written_beside_the_result_with_the_thresholds(mock_server, qwen3_path, tmp_path):
    mock = mock_server(ttft_ms=5, itl_ms=3)
    args = bench(mock.url, qwen3_path, "--plot-timeline", "--plot-dataset-stats", "--result-dir", str(tmp_path),
                 "--result-filename", "r.json")
    assert main(args + ["--timeline-itl-thresholds", "1,2"]) == 0  # plots name the file even without saving
    page = (tmp_path / "r.timeline.html").read_text()
    assert "<svg" in page and "#d62728" in page  # 3 ms gaps are above 2 ms: red
    assert (tmp_path / "r.dataset_stats.png").read_bytes()[:4] == b"\x89PNG"
    assert main(args + ["--timeline-itl-thresholds", "10,20", "--save-result"]) == 0
    page = (tmp_path / "r.timeline.html").read_text()
    # 3 ms gaps are below 10 ms: green. A gap the scheduler stretched may pass a threshold,
    # so each other colour is on the page exactly when the run's own records have such a gap
    records = [json.loads(x) for x in open(tmp_path / "r.records.jsonl")]
    gaps = [b - a for r in records for a, b in zip(r["token_ms"], r["token_ms"][1:])]
    assert len(gaps) == 6 * 3 and "#2ca02c" in page
    assert ("#ff7f0e" in page) == any(10 <= g <= 20 for g in gaps)
    assert ("#d62728" in page) == any(g > 20 for g in gaps)


def test_beam_search_is_accepted_said_and_sends_nothing(mock, qwen3_path, capsys):
    assert main(bench(mock.url, qwen3_path, "--use-beam-search", "--num-prompts", "1")) == 0
    assert not any("beam" in k for k in completions(mock)[0])
    assert "--use-beam-search has no effect" in capsys.readouterr().err


@pytest.mark.parametrize("extra, needle", [
    (["--dataset-name", "random-mm"], "random-mm is not supported: sends images and videos"),
    (["--dataset-name", "hf", "--dataset-path", ".", "--hf-name", "yale-nlp/MMVU"],
     "hf with yale-nlp/MMVU is not supported: it sends videos"),
    (["--dataset-name", "hf", "--dataset-path", "."], "--dataset-name hf: unknown dataset '.'; pass --hf-name"),
    (["--backend", "openai-embeddings"], "--backend openai-embeddings is not supported"),
    (["--enable-multimodal-chat"], "--enable-multimodal-chat is not supported"),
    (["--random-mm-base-items-per-request", "2"], "--random-mm-base-items-per-request is not supported"),
    (["--asr-max-audio-len-sec", "3"], "--asr-max-audio-len-sec is not supported"),
    (["--random-batch-size", "4"], "--random-batch-size is not supported"),
    (["--custom-ensure-client-side-data"], "--custom-ensure-client-side-data is not supported"),
    (["--tokenizer-mode", "mistral"], "--tokenizer-mode mistral is not supported"),
    (["--skip-tokenizer-init"], "--skip-tokenizer-init: dataset random"),
    (["--self-timed"], "--self-timed/--no-self-timed is only for --dataset-name timed_trace"),
    (["--ramp-up-strategy", "linear", "--ramp-up-start-rps", "1"], "needs both"),
    (["--ramp-up-strategy", "linear", "--ramp-up-start-rps", "1", "--ramp-up-end-rps", "2", "--request-rate", "3"],
     "do not give --request-rate"),
    (["--ramp-up-strategy", "exponential", "--ramp-up-start-rps", "0", "--ramp-up-end-rps", "2"], "must be > 0"),
    (["--ramp-up-strategy", "linear", "--ramp-up-start-rps", "5", "--ramp-up-end-rps", "2"], "must not exceed"),
    (["--timeline-itl-thresholds", "50,25"], "--timeline-itl-thresholds"),
    (["--chat-template-kwargs", "[1]"], "--chat-template-kwargs: must be a JSON object"),
    (["--probe-request-rate", "1", "--workers", "2"], "--probe-request-rate runs in one client process"),
    (["--profile", "--workers", "2"], "--profile runs in one client process"),
])
def test_what_servelab_cannot_do_stops_in_one_line(extra, needle, qwen3_path, capsys):
    rc = main(bench("http://127.0.0.1:9", qwen3_path, *extra))
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and needle in err and "Traceback" not in err, err


def test_hf_and_trace_flags_parse_with_vllms_defaults():
    from servelab.flags.bench_serve import parse_bench_argv

    args = parse_bench_argv(["--hf-name", "x/y", "--hf-split", "train", "--no-stream", "--timed-trace-sec-multiplier",
                             "0.001", "--spec-bench-category", "qa", "--speed-bench-dataset-subset", "throughput_1k"])
    assert (args.hf_name, args.hf_split, args.no_stream, args.timed_trace_sec_multiplier) == ("x/y", "train", True, 0.001)
    assert args.spec_bench_output_len == 256 and args.speed_bench_output_len == 4096 and args.timed_trace_chunk_hash_size == 16


def test_timeline_spans_of_one_colour_merge():
    from servelab.results.plots import merge_runs

    spans = [(0.0, 1.0), (1.0, 0.5), (1.5, 0.5), (2.0, 1.0)]
    assert merge_runs(spans, ["g", "a", "a", "r"]) == ([(0.0, 1.0), (1.0, 1.0), (2.0, 1.0)], ["g", "a", "r"])
