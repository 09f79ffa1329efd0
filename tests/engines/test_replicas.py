"""Each replica's port and share of the hardware, per engine kind (no process started)."""

import pytest

from servelab.engines import replicas
from servelab.engines.replicas import cpu_bind, fill, replica_specs
from servelab.engines.spec import EngineSpec
from servelab.errors import InputError


@pytest.fixture
def build(monkeypatch):
    def set_build(name):
        monkeypatch.setattr(replicas, "vllm_build", lambda: name)
    return set_build


def test_vllm_cpu_replicas_bind_their_own_cores(build):
    build("cpu")
    spec = EngineSpec(name="embedded", kind="embedded", port=8000)
    specs = replica_specs(spec, 2, cores=[0, 1], devices=[])
    assert [(s.name, s.port, s.env["VLLM_CPU_OMP_THREADS_BIND"]) for s in specs] == \
        [("embedded-r0", 8000, "0"), ("embedded-r1", 8001, "1")]


def test_vllm_cpu_tensor_parallel_ranks_split_the_share(build):
    build("cpu")
    spec = EngineSpec(name="v", kind="vllm", model="m", args=("--tensor-parallel-size", "2"))
    assert [s.env["VLLM_CPU_OMP_THREADS_BIND"] for s in replica_specs(spec, 2, list(range(8)), [])] == \
        ["0,1|2,3", "4,5|6,7"]
    assert cpu_bind([4, 5, 6], 1) == "4,5,6"


def test_vllm_gpu_replicas_get_their_own_devices(build):
    build("gpu")
    spec = EngineSpec(name="v", kind="vllm", model="m", port=9000)
    specs = replica_specs(spec, 2, cores=[0, 1], devices=["0", "1", "2", "3"])
    assert [(s.port, s.env["CUDA_VISIBLE_DEVICES"]) for s in specs] == [(9000, "0,1"), (9001, "2,3")]
    with pytest.raises(InputError, match="2 replicas need at least 2 GPUs; 1 available"):
        replica_specs(spec, 2, cores=[0, 1], devices=["0"])


def test_a_users_own_setting_wins(build):
    build("cpu")
    spec = EngineSpec(name="v", kind="vllm", model="m", env={"VLLM_CPU_OMP_THREADS_BIND": "nobind"})
    assert {s.env["VLLM_CPU_OMP_THREADS_BIND"] for s in replica_specs(spec, 2, [0, 1], [])} == {"nobind"}
    lcpp = EngineSpec(name="l", kind="llamacpp", model="m.gguf", args=("-t", "3"))
    assert [s.args for s in replica_specs(lcpp, 2, [0, 1], [])] == [("-t", "3"), ("-t", "3")]


def test_llamacpp_threads_per_replica():
    spec = EngineSpec(name="l", kind="llamacpp", model="m.gguf", args=("--parallel", "4"))
    specs = replica_specs(spec, 2, cores=[0, 1, 2, 3, 4], devices=[])
    assert [s.args for s in specs] == [("--parallel", "4", "--threads", "2")] * 2
    with pytest.raises(InputError, match="3 replicas need at least 3 cores"):
        replica_specs(spec, 3, cores=[0, 1], devices=[])


def test_command_placeholders():
    assert fill("x-{replica}:{port}", 8001, 1) == "x-1:8001"
    spec = EngineSpec(name="c", kind="command", port=8000, command=("srv", "--port", "8000"),
                      ready_url="http://127.0.0.1:8000/health")
    template = EngineSpec(name="c", kind="command", port=8000, command=("srv", "--port", "{port}", "--id", "{replica}"),
                          ready_url="http://127.0.0.1:8000/health")
    specs = replica_specs(template, 2, [0, 1], [])
    assert (specs[1].command, specs[1].ready_url) == (("srv", "--port", "8001", "--id", "1"),
                                                      "http://127.0.0.1:8001/health")
    assert specs[0].command == ("srv", "--port", "8000", "--id", "0")
    assert replica_specs(spec, 1, [0], [])[0].port == 8000


def test_sim_gets_ports_only_and_external_is_refused():
    sim = EngineSpec(name="s", kind="sim", port=8100)
    assert [(s.port, s.env, s.args) for s in replica_specs(sim, 2, [0], [])] == [(8100, {}, ()), (8101, {}, ())]
    with pytest.raises(InputError, match="external server cannot be replicated"):
        replica_specs(EngineSpec(name="e", kind="external", url="http://x:1"), 2, [0, 1], [])
