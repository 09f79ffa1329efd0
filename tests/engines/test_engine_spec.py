import dataclasses
import re
import socket
import sys

import pytest

from servelab.engines import ENGINES, KINDS, EngineSpec, start_engine
from servelab.engines.vllm import VllmEngine, vllm_build
from servelab.errors import EngineError, InputError


def test_engines_dict_has_every_kind():
    assert list(ENGINES) == list(KINDS) == ["embedded", "vllm", "llamacpp", "external", "command", "sim"]


def test_spec_defaults_and_base_url():
    spec = EngineSpec(name="a", kind="vllm", model="org/model", args=["--max-num-seqs", "2"])
    assert (spec.host, spec.port) == ("127.0.0.1", 8000)
    assert spec.args == ("--max-num-seqs", "2")  # a list is accepted, stored frozen
    assert spec.base_url == "http://127.0.0.1:8000"
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.port = 1


def test_wildcard_host_is_reached_on_loopback():
    assert EngineSpec(name="a", kind="vllm", model="m", host="0.0.0.0", port=9).base_url == "http://127.0.0.1:9"


def test_external_base_url_is_the_url():
    spec = EngineSpec(name="x", kind="external", url="http://gpu-box:8000/")
    assert spec.base_url == "http://gpu-box:8000"


@pytest.mark.parametrize("kwargs, message", [
    (dict(kind="tgi", model="m"), "unknown engine kind 'tgi'"),
    (dict(kind="vllm"), "kind vllm needs a model"),
    (dict(kind="vllm", model="m", port=0), "port 0 is not in 1..65535"),
    (dict(kind="vllm", model="m", ready_timeout_s=0), "ready_timeout_s must be > 0"),
    (dict(kind="external"), "kind external needs url="),
    (dict(kind="command", ready_url="http://127.0.0.1:8000/health"), "kind command needs a command line"),
    (dict(kind="command", command=["srv"]), "kind command needs ready_url="),
    (dict(kind="command", command=["srv"], port=8000, ready_url="http://127.0.0.1:9000/health"),
     "ready_url http://127.0.0.1:9000/health is on port 9000 but the engine's port is 8000"),
    (dict(kind="vllm", model="m", args=["--port", "9"]), "set host/port on the spec, not in args (--port)"),
    (dict(kind="vllm", model="m", args=["--host=0.0.0.0"]), "not in args (--host=0.0.0.0)"),
])
def test_invalid_specs_name_the_problem(kwargs, message):
    with pytest.raises(InputError, match=re.escape(message)):
        EngineSpec(name="e", **kwargs)


def test_missing_model_path_is_an_input_error_before_launch(tmp_path):
    spec = EngineSpec(name="e", kind="vllm", model=str(tmp_path / "nope"))
    with pytest.raises(InputError, match=f"model path {tmp_path / 'nope'} does not exist"):
        start_engine(spec, tmp_path / "logs", progress=False)


def test_missing_gguf_is_an_input_error(tmp_path):
    spec = EngineSpec(name="e", kind="llamacpp", model=str(tmp_path / "m.gguf"))
    with pytest.raises(InputError, match="does not exist"):
        start_engine(spec, tmp_path / "logs", progress=False)


def test_port_taken_is_an_input_error_naming_the_port(tmp_path, port):
    spec = EngineSpec(name="e", kind="command", command=[sys.executable, "-c", "pass"], port=port,
                      ready_url=f"http://127.0.0.1:{port}/health")
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        with pytest.raises(InputError, match=f"port {port} on 127.0.0.1 is already in use"):
            start_engine(spec, tmp_path, progress=False)
    # Nothing was launched: the log holds only the header line.
    assert len((tmp_path / "engine.log").read_text().splitlines()) == 1


def test_command_that_cannot_run_is_an_engine_error(tmp_path, port):
    spec = EngineSpec(name="e", kind="command", command=[str(tmp_path / "no-such-server")], port=port,
                      ready_url=f"http://127.0.0.1:{port}/health")
    with pytest.raises(EngineError, match="cannot run"):
        start_engine(spec, tmp_path, progress=False)


@pytest.mark.skipif(vllm_build() != "cpu", reason="needs vLLM's CPU build installed")
def test_vllm_cpu_command_and_defaults(tmp_path):
    spec = EngineSpec(name="e", kind="vllm", model=str(tmp_path), port=8123, args=["--max-model-len", "2048"])
    argv = VllmEngine().command(spec)
    assert argv[:3] == [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
    assert argv[3:] == ["--model", str(tmp_path), "--host", "127.0.0.1", "--port", "8123",
                        "--dtype", "float32", "--enforce-eager", "--max-model-len", "2048"]  # engines/vllm.cpu_dtype


@pytest.mark.skipif(vllm_build() != "cpu", reason="needs vLLM's CPU build installed")
def test_vllm_cpu_defaults_yield_to_the_user(tmp_path, monkeypatch):
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    spec = EngineSpec(name="e", kind="vllm", model=str(tmp_path), args=["--no-enforce-eager"])
    assert "--enforce-eager" not in VllmEngine().command(spec)
    assert VllmEngine().environment(spec) == {"VLLM_CPU_KVCACHE_SPACE": "1"}
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "4")
    assert VllmEngine().environment(spec) == {}


def test_each_engine_kind_says_how_to_serve_its_winner():
    """The serve line is the engine kind's: vLLM's is ``vllm serve`` with the flags as
    measured, the simulator's the knobs to try, any other its command as launched; none
    keeps the host and port servelab chose, nor the measurement's own environment."""
    from servelab.engines.kinds import ENGINES, serve_command
    from servelab.engines.spec import EngineSpec

    vllm = EngineSpec(name="w", kind="vllm", model="Qwen/Qwen3-8B", args=("--max-num-seqs", "64"), port=8123,
                      env={"VLLM_SERVER_DEV_MODE": "1", "HF_HOME": "/h"})
    line = serve_command(vllm)
    assert line.startswith("HF_HOME=/h ") and " vllm serve Qwen/Qwen3-8B " in line  # its CPU defaults between
    assert line.endswith(" --max-num-seqs 64")
    assert "8123" not in line and "VLLM_SERVER_DEV_MODE" not in line
    sim = serve_command(EngineSpec(name="s", kind="sim", args=("--max-num-seqs", "4"), port=8123))
    assert sim == "servelab serve --engine sim -- --max-num-seqs 4   # SIMULATED: try these knobs on the real engine"
    command = EngineSpec(name="c", kind="command", command=("my-server", "--fast"), ready_url="http://127.0.0.1:8000/health")
    assert serve_command(command) == "my-server --fast"
    assert all(callable(getattr(kind, "serve_command", None)) for kind in ENGINES.values())
