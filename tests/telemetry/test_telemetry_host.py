"""telemetry/host.py: the machine's description, read from psutil, /proc and /sys."""

import os
import platform

from servelab.telemetry import host

KEYS = {"cpu_model", "logical_cores", "physical_cores", "usable_cores", "memory_total_gib",
        "memory_available_gib", "numa_nodes"}


def test_the_real_host_report_has_sane_values():
    report = host.host_report()
    assert set(report) == KEYS
    assert report["logical_cores"] >= 1 and report["memory_total_gib"] > 0 and report["cpu_model"]
    assert report["memory_available_gib"] <= report["memory_total_gib"]


def test_process_name_of_this_process_and_of_none():
    with open(f"/proc/{os.getpid()}/comm") as f:  # Linux only, like the code under test
        assert host.process_name(os.getpid()) == f.read().strip()
    assert host.process_name(2**31 - 1) is None  # no such pid


def test_cpu_model_is_the_first_model_name_else_the_platform(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: AMD EPYC 9654\nprocessor\t: 1\nmodel name\t: other\n")
    assert host.cpu_model(cpuinfo) == "AMD EPYC 9654"
    expected = platform.processor() or platform.machine() or "unknown"
    assert host.cpu_model(tmp_path / "absent") == expected
    cpuinfo.write_text("processor\t: 0\nFeatures\t: fp asimd\n")  # an Arm board names no model
    assert host.cpu_model(cpuinfo) == expected
