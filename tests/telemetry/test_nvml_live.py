"""NVML on a real GPU: skipped where NVML sees none (CI, this project's CPU machines); run on a lent
GPU machine by ``bench/gpu_check.sh``. The fakes in test_nvml.py fix the fields; these check that a
real driver answers them with the units servelab assumes."""

from __future__ import annotations

import re
import time

import pytest

from servelab.planner.gpus import find_gpu
from servelab.telemetry.gpu import gpu_check, open_gpus

pytest.importorskip("pynvml")
_opened, _why = open_gpus()
if _opened is None:
    pytest.skip(f"needs a GPU that NVML sees ({_why})", allow_module_level=True)
_opened.close()


def test_the_pre_flight_check_reads_the_gpu_in_the_units_it_prints():
    report = gpu_check()
    assert report["nvml_error"] is None
    assert re.fullmatch(r"\d+\.\d+", report["cuda_version"])
    gpu = report["gpus"][0]
    assert gpu["name"] and isinstance(gpu["name"], str)
    assert re.fullmatch(r"\d+\.\d+", gpu["compute_capability"])
    assert 1 < gpu["memory_total_gib"] < 1024  # GiB, not bytes or MiB
    assert gpu["memory_used_gib"] + gpu["memory_free_gib"] <= gpu["memory_total_gib"] + 0.01
    assert 1 < gpu["power_draw_w"] < 2000  # watts, not milliwatts
    assert gpu["power_cap_w"] >= 50
    assert re.fullmatch(r"P\d+", gpu["pstate"])


def test_the_planner_table_holds_the_memory_the_driver_reports():
    """The planner's memory_gib is nvidia-smi's memory.total / 1024 (planner/gpus.py); for a GPU the
    table has, the driver must agree to within 0.5 %."""
    gpu = gpu_check()["gpus"][0]
    known = find_gpu(gpu["name"].replace("NVIDIA ", "").replace(" ", "-"))
    if known is None:
        pytest.skip(f"needs a GPU the planner's table has ({gpu['name']} is not in it)")
    assert abs(known.memory_gib / gpu["memory_total_gib"] - 1) < 0.005


def test_the_energy_counter_rises_at_the_power_drawn():
    """Joules from the total-energy counter over 2 s agree with the power read across them within a
    factor of two (the power reading is a short average; idle power varies)."""
    gpus, _ = open_gpus()
    try:
        first = gpus.sample()[0]
        t0 = time.perf_counter()
        time.sleep(2.0)
        second = gpus.sample()[0]
        elapsed = time.perf_counter() - t0
    finally:
        gpus.close()
    if first["energy_j"] is None:
        pytest.skip("needs a total-energy counter (this GPU is pre-Volta)")
    joules = second["energy_j"] - first["energy_j"]
    watts = (first["power_w"] + second["power_w"]) / 2
    assert joules > 0
    assert 0.5 < joules / (watts * elapsed) < 2.0
