"""``servelab gpu``: exact output without a GPU, and through a fake NVML with two GPUs."""

import argparse
import json
import sys
from types import SimpleNamespace

import pytest

from servelab.cli import gpu
from servelab.telemetry import host

HOST = {"cpu_model": "AMD EPYC", "logical_cores": 2, "physical_cores": 2, "usable_cores": 2,
        "memory_total_gib": 23.54, "memory_available_gib": 22.54, "numa_nodes": 1}


def run(capsys, *argv: str) -> str:
    parser = argparse.ArgumentParser()
    gpu.add_arguments(parser)
    assert gpu.run(parser.parse_args(argv)) == 0
    return capsys.readouterr().out


@pytest.fixture
def fixed_host(monkeypatch):
    monkeypatch.setattr(host, "host_report", lambda: dict(HOST))


def test_without_nvidia_ml_py_says_so_and_describes_the_cpu(monkeypatch, capsys, fixed_host):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    assert run(capsys) == (
        "no GPU: nvidia-ml-py is not installed (the gpu extra: pip install 'servelab[gpu]')\n"
        "\n"
        "cpu         AMD EPYC\n"
        "cores       2 logical, 2 physical\n"
        "memory      23.54 GiB total, 22.54 GiB available\n"
        "numa nodes  1\n"
    )


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


def fake_nvml(devices: list[dict], init_error: str | None = None):
    def init():
        if init_error:
            raise NVMLError(init_error)

    def field(name):
        def get(handle):
            value = devices[handle][name]
            if value is NVMLError_NotSupported:
                raise NVMLError_NotSupported("Not Supported")
            return value
        return get

    return SimpleNamespace(
        NVMLError=NVMLError, nvmlInit=init, nvmlShutdown=lambda: None,
        nvmlDeviceGetCount=lambda: len(devices), nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlSystemGetDriverVersion=lambda: b"570.86.15", nvmlSystemGetCudaDriverVersion=lambda: 12080,
        nvmlDeviceGetName=field("name"), nvmlDeviceGetCudaComputeCapability=field("cc"),
        nvmlDeviceGetMemoryInfo=field("memory"), nvmlDeviceGetPerformanceState=field("pstate"),
        nvmlDeviceGetPowerUsage=field("power"), nvmlDeviceGetEnforcedPowerLimit=field("cap"),
        nvmlDeviceGetUtilizationRates=field("util"), nvmlDeviceGetComputeRunningProcesses=field("procs"),
        nvmlDeviceGetMaxClockInfo=lambda handle, clock: 1980, NVML_CLOCK_SM=1,
    )


GIB = 2**30
H100 = {"name": "NVIDIA H100 80GB HBM3", "cc": (9, 0),
        "memory": SimpleNamespace(total=80 * GIB, used=72 * GIB, free=8 * GIB), "pstate": 0,
        "power": 312_456, "cap": 700_000, "util": SimpleNamespace(gpu=97, memory=61),
        "procs": [SimpleNamespace(pid=999_999_999, usedGpuMemory=71 * GIB)]}
OLD = {"name": b"Tesla T4", "cc": (7, 5), "memory": SimpleNamespace(total=16 * GIB, used=0, free=16 * GIB),
       "pstate": 8, "power": NVMLError_NotSupported, "cap": 70_000,
       "util": NVMLError_NotSupported, "procs": []}


def test_two_gpus_with_an_unsupported_field(monkeypatch, capsys, fixed_host):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([H100, OLD]))
    assert run(capsys) == (
        "driver 570.86.15, CUDA 12.8\n"
        "\n"
        "gpu 0        NVIDIA H100 80GB HBM3 (compute capability 9.0)\n"
        "memory       72.0 / 80.0 GiB used, 8.0 GiB free\n"
        "pstate       P0\n"
        "power        312.5 W of 700.0 W cap\n"
        "utilization  gpu 97 %, memory 61 %\n"
        "processes    999999999 ? (71.0 GiB)\n"
        "\n"
        "gpu 1        Tesla T4 (compute capability 7.5)\n"
        "memory       0.0 / 16.0 GiB used, 16.0 GiB free\n"
        "pstate       P8\n"
        "power        n/a W of 70.0 W cap\n"
        "utilization  gpu n/a %, memory n/a %\n"
        "processes    none\n"
        "\n"
        "cpu         AMD EPYC\n"
        "cores       2 logical, 2 physical\n"
        "memory      23.54 GiB total, 22.54 GiB available\n"
        "numa nodes  1\n"
    )


def test_json_has_every_field(monkeypatch, capsys, fixed_host):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([H100]))
    report = json.loads(run(capsys, "--json"))
    assert report["gpus"][0] == {
        "index": 0, "name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0",
        "memory_total_gib": 80.0, "memory_used_gib": 72.0, "memory_free_gib": 8.0, "pstate": "P0",
        "power_draw_w": 312.5, "power_cap_w": 700.0, "utilization_gpu_pct": 97,
        "utilization_memory_pct": 61, "processes": [{"pid": 999999999, "name": None, "used_gib": 71.0}],
    }
    assert (report["driver_version"], report["cuda_version"], report["nvml_error"]) == ("570.86.15", "12.8", None)
    assert report["host"] == HOST


def test_nvml_that_will_not_start_is_not_an_error(monkeypatch, capsys, fixed_host):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([], init_error="Driver Not Loaded"))
    out = run(capsys, "--json")
    assert json.loads(out)["nvml_error"] == "NVML unavailable (Driver Not Loaded)"

