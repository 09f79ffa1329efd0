"""planner.predict.local_device: this machine's first GPU (through telemetry's NVML), else its host."""

import psutil

from servelab.planner import predict

GIB = 2**30


def test_the_first_gpu_matched_to_the_table_with_its_own_memory(monkeypatch):
    monkeypatch.setattr(predict, "gpu_devices", lambda: [{"index": 0, "name": "NVIDIA H200", "memory_total_gib": 139.8},
                                                         {"index": 1, "name": "Tesla T4", "memory_total_gib": 15.0}])
    device = predict.local_device(cpu=False)
    assert (device.name, device.memory_gib) == ("H200", 139.8)


def test_no_gpu_or_unknown_memory_or_cpu_asked_plans_for_the_host(monkeypatch):
    host_gib = psutil.virtual_memory().total / GIB
    for found in ([], [{"index": 0, "name": "NVIDIA H200", "memory_total_gib": None}]):
        monkeypatch.setattr(predict, "gpu_devices", lambda: found)
        device = predict.local_device(cpu=False)
        assert (device.name, round(device.memory_gib, 3)) == ("cpu", round(host_gib, 3))
    monkeypatch.setattr(predict, "gpu_devices", lambda: 1 / 0)  # --cpu: NVML is not asked at all
    assert predict.local_device(cpu=True).name == "cpu"
