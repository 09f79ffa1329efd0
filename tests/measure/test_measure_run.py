"""``measure/run.execute``: one bench run from a ``BenchSpec`` built in code — no argv anywhere."""

from __future__ import annotations

import dataclasses
import json

import psutil
import spinners

from servelab.config import BenchSpec, DatasetSpec, LoadSpec, OutputSpec, ServerSpec
from servelab.measure.run import bench_tokenizer, execute


def spec_for(url: str, tmp_path, tokenizer: str | None, **load) -> BenchSpec:
    return BenchSpec(
        server=ServerSpec(base_url=url),
        load=LoadSpec(**load),
        dataset=DatasetSpec(name="random", num_prompts=10, random_input_len=16, random_output_len=6, seed=5),
        output=OutputSpec(save_result=True, result_dir=str(tmp_path), result_filename="r.json",
                          progress=False, telemetry=False),
        tokenizer=tokenizer)


def test_a_spec_built_in_code_runs_a_bench_against_the_mock(mock_server, qwen3_path, tmp_path, capsys):
    mock = mock_server(ttft_ms=2, itl_ms=1)
    spec = spec_for(mock.url, tmp_path, qwen3_path, max_concurrency=3, request_rate=500.0)
    before = dataclasses.replace(spec)
    outcome = execute(spec)
    assert outcome.exit_code == 0 and outcome.summary.completed == 10
    assert spec == before  # execute mutates nothing (the model it asked the server for stays local)
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["max_concurrency"] == 3 and result["request_rate"] == 500.0
    assert result["model_id"] == "mock"  # from the server's /v1/models: the spec had none
    # what the server saw is what the spec asked for: 10 requests of 6 tokens each
    truth = mock.truth().requests
    assert len(truth) == 10 and {r.planned_tokens for r in truth} == {6}
    flags = result["servelab"]["provenance"]["flags"]
    assert flags["max_concurrency"] == 3 and flags["dataset_name"] == "random" and flags["seed"] == 5
    assert "Maximum request concurrency: 3" in capsys.readouterr().out
    # a plain stream's record lives in the tally's columns: nothing kept per request beside them
    # (50 MB at 500k requests when every record set one rare field)
    assert outcome.tally.added == 10 and not any(outcome.tally.other.values())


def test_request_ids_are_drawn_per_run_when_no_prefix_is_given(mock_server, qwen3_path, tmp_path):
    """One spec serves many runs (a study's repeats): as vLLM, each run draws its own id prefix."""
    mock = mock_server()
    spec = spec_for(mock.url, tmp_path, qwen3_path)
    spec = dataclasses.replace(spec, dataset=dataclasses.replace(spec.dataset, request_id_prefix=None,
                                                                 num_prompts=2))
    execute(spec)
    execute(spec)
    ids = [r.request_id for r in mock.truth().requests]
    assert len(ids) == 4 and len(set(ids)) == 4 and all(i.startswith("bench-") for i in ids)


def test_a_served_alias_with_no_local_tokenizer_falls_back_to_the_bundled_one(qwen3_path, capsys):
    """The model name the server answers may be an alias no tokenizer is found for: the
    bundled Qwen3 tokenizer is used, with a note, as the README says."""
    tok = bench_tokenizer(BenchSpec(), "my-served-alias")
    assert tok.encode("hello") == [14990]  # the Qwen3 tokenizer's id for "hello"
    assert "no tokenizer for model 'my-served-alias'" in capsys.readouterr().err


def test_an_explicit_tokenizer_that_cannot_load_is_an_error(tmp_path):
    import pytest

    from servelab.errors import TokenizerError

    with pytest.raises(TokenizerError):
        bench_tokenizer(BenchSpec(tokenizer=str(tmp_path / "missing")), "m")


def test_streams_that_end_without_a_finish_are_counted_and_said(qwen3_path, tmp_path, capsys):
    """A server whose stream ends (cleanly framed) with neither a finish_reason nor [DONE]:
    each request counts as a success, as vLLM's client counts it, but the result and the
    console say how many ended that way."""
    import http.server
    import threading

    events = b"".join(b'data: {"choices": [{"index": 0, "text": "%s"}]}\n\n' % w for w in (b"a", b"b", b"c"))

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(events)))
            self.end_headers()
            self.wfile.write(events)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        spec = spec_for(f"http://127.0.0.1:{server.server_port}", tmp_path, qwen3_path)
        spec = dataclasses.replace(spec, server=dataclasses.replace(spec.server, model="m"),
                                   dataset=dataclasses.replace(spec.dataset, num_prompts=4))
        outcome = execute(spec)
    finally:
        server.shutdown()
    assert outcome.summary.completed == 4 and outcome.result["servelab"]["unfinished_streams"] == 4
    assert "servelab: 4 successful requests' streams ended without a finish_reason or [DONE]" in capsys.readouterr().out
    lines = (tmp_path / "r.records.jsonl").read_text().splitlines()
    assert [json.loads(x)["finished"] for x in lines] == [False] * 4


def test_a_run_beside_busy_strangers_says_so_in_its_result_and_on_the_console(mock_server, qwen3_path, tmp_path,
                                                                            capsys):
    """One stranger spinning per CPU: others take most of the machine, whatever else runs."""
    mock = mock_server(ttft_ms=50, itl_ms=20)
    spec = spec_for(mock.url, tmp_path, qwen3_path, max_concurrency=2)
    with spinners.strangers(tmp_path, psutil.cpu_count()):
        outcome = execute(spec)
    shared = outcome.result["servelab"]["machine"]
    assert shared["cpus"] == psutil.cpu_count() and shared["seconds"] > 0.5
    assert shared["others_fraction"] >= 0.25 and shared["busy_fraction"] >= shared["others_fraction"], shared
    assert f"servelab: WARNING other programs kept {shared['others_fraction']:.0%} of the machine's" \
        in capsys.readouterr().out
    saved = json.loads((tmp_path / "r.json").read_text())["servelab"]["machine"]
    assert saved == shared


def test_an_engine_started_by_hand_beside_the_bench_is_not_a_neighbour(qwen3_path, tmp_path, capsys):
    """The mock in a process of its own listens on the bench's port, as `vllm serve` would:
    the result names it as the local engine, counted with servelab (tests/telemetry/
    test_machine.py checks the counting on a process outside the test's tree)."""
    from servelab.mock.config import MockConfig
    from servelab.mock.launch import run_in_subprocess

    with run_in_subprocess(MockConfig(ttft_ms=50, itl_ms=20, port=0)) as mock:
        outcome = execute(spec_for(mock.url, tmp_path, qwen3_path, max_concurrency=2))
    shared = outcome.result["servelab"]["machine"]
    assert shared["local_engine_pids"] == [mock._proc.pid], shared
