"""NVML sampling against a fake pynvml: fields, unsupported queries, absent GPUs."""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace

import pytest

from servelab.telemetry import gpu


class NVMLError(Exception):
    pass


def fake_pynvml(count: int = 1, init_fails: bool = False, no_power: bool = False, no_energy: bool = False):
    m = types.ModuleType("pynvml")
    m.NVMLError, m.NVML_CLOCK_SM = NVMLError, 1
    m.shutdowns = 0

    def init():
        if init_fails:
            raise NVMLError("Driver Not Loaded")

    def power(h):
        if no_power:
            raise NVMLError("Not Supported")
        return 612_000

    def energy(h):  # a pre-Volta board has no total-energy counter
        if no_energy:
            raise NVMLError("Not Supported")
        return 1_234_567  # mJ since the driver loaded

    def shutdown():
        m.shutdowns += 1

    m.nvmlInit, m.nvmlShutdown, m.nvmlDeviceGetCount = init, shutdown, lambda: count
    m.nvmlDeviceGetHandleByIndex = lambda i: f"h{i}"
    m.nvmlDeviceGetName = lambda h: b"NVIDIA H200"
    m.nvmlDeviceGetMemoryInfo = lambda h: SimpleNamespace(total=141 * 2**30, used=127 * 2**30)
    m.nvmlDeviceGetEnforcedPowerLimit = lambda h: 700_000
    m.nvmlDeviceGetMaxClockInfo = lambda h, kind: 1980
    m.nvmlDeviceGetUtilizationRates = lambda h: SimpleNamespace(gpu=97, memory=64)
    m.nvmlDeviceGetPowerUsage = power
    m.nvmlDeviceGetTotalEnergyConsumption = energy
    m.nvmlDeviceGetClockInfo = lambda h, kind: 1755
    m.nvmlDeviceGetPerformanceState = lambda h: 0
    return m


def test_static_and_sampled_fields(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(count=2))
    gpus, status = gpu.open_gpus()
    assert status == "ok" and len(gpus.devices) == 2
    assert gpus.devices[1] == {"index": 1, "name": "NVIDIA H200", "memory_total_gib": 141.0,
                               "power_limit_w": 700.0, "sm_clock_max_mhz": 1980}
    assert gpus.sample()[0] == {"util": 97, "mem_util": 64, "mem_used_gib": 127.0, "power_w": 612.0,
                                "energy_j": 1234.567, "sm_clock_mhz": 1755, "pstate": 0}
    gpus.close()
    assert sys.modules["pynvml"].shutdowns == 1


def test_an_unsupported_query_is_none_not_a_crash(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(no_power=True))
    gpus, _ = gpu.open_gpus()
    assert gpus.sample()[0]["power_w"] is None and gpus.sample()[0]["util"] == 97
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(no_energy=True))
    gpus, _ = gpu.open_gpus()
    assert gpus.sample()[0]["energy_j"] is None and gpus.sample()[0]["power_w"] == 612.0


def test_no_driver_no_gpu_no_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(init_fails=True))
    assert gpu.open_gpus() == (None, "NVML unavailable (Driver Not Loaded)")
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(count=0))
    assert gpu.open_gpus() == (None, "NVML found no GPU")
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    gpus, why = gpu.open_gpus()
    assert gpus is None and "nvidia-ml-py" in why


def test_gpu_devices_opens_reads_and_closes(monkeypatch):
    fake = fake_pynvml(count=2)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert [(d["index"], d["name"], d["memory_total_gib"]) for d in gpu.gpu_devices()] == [
        (0, "NVIDIA H200", 141.0), (1, "NVIDIA H200", 141.0)]
    assert fake.shutdowns == 1
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(init_fails=True))
    assert gpu.gpu_devices() == []
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert gpu.gpu_devices() == []


def test_an_error_that_is_not_nvml_is_not_hidden(monkeypatch):
    fake = fake_pynvml()
    fake.nvmlDeviceGetMemoryInfo = lambda h: 1 / 0  # a bug, not an unsupported query
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    with pytest.raises(ZeroDivisionError):
        gpu.gpu_devices()
