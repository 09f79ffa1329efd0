"""``servelab gpu``: pre-flight check of the GPUs through NVML, or of the CPU when there is none.

NVML is opened by ``telemetry.gpu.open_gpus`` (module ``pynvml`` from
``nvidia-ml-py``, imported only when the command runs). A field a GPU does not support reads "n/a" (None in JSON)
instead of failing the whole check. No GPU or no NVML is not an error: the
command says so, describes the CPU host, and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from pathlib import Path

GIB = 2**30


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def run(args: argparse.Namespace) -> int:
    report = {**gpu_report(), "host": host_report()}
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0


def gpu_report() -> dict:
    """{"gpus": [...], "driver_version", "cuda_version", "nvml_error"} — nvml_error set when no GPU is visible."""
    from servelab.telemetry.gpu import open_gpus  # the one NVML opener

    opened, why = open_gpus()
    if opened is None:
        return _no_gpu(why)
    nvml = opened.nvml
    try:
        gpus = [_device(nvml, handle, i) for i, handle in enumerate(opened.handles)]
        return {"gpus": gpus, "driver_version": _get(nvml.nvmlSystemGetDriverVersion),
                "cuda_version": _cuda_version(nvml), "nvml_error": None}
    finally:
        opened.close()


def _no_gpu(reason: str) -> dict:
    return {"gpus": [], "driver_version": None, "cuda_version": None, "nvml_error": reason}


def _get(call, *args):
    """call(*args), or None when this GPU/driver does not support it (NVMLError)."""
    try:
        value = call(*args)
    except Exception as exc:  # pynvml raises NVMLError subclasses; keep the check going
        if type(exc).__name__.startswith("NVMLError"):
            return None
        raise
    return value.decode() if isinstance(value, bytes) else value


def _cuda_version(pynvml) -> str | None:
    version = _get(pynvml.nvmlSystemGetCudaDriverVersion)  # e.g. 12040 -> "12.4"
    return None if version is None else f"{version // 1000}.{version % 1000 // 10}"


def _device(pynvml, handle, index: int) -> dict:
    memory = _get(pynvml.nvmlDeviceGetMemoryInfo, handle)
    util = _get(pynvml.nvmlDeviceGetUtilizationRates, handle)
    capability = _get(pynvml.nvmlDeviceGetCudaComputeCapability, handle)
    pstate = _get(pynvml.nvmlDeviceGetPerformanceState, handle)
    return {
        "index": index,
        "name": _get(pynvml.nvmlDeviceGetName, handle),
        "compute_capability": f"{capability[0]}.{capability[1]}" if capability else None,
        "memory_total_gib": _gib(memory.total) if memory else None,
        "memory_used_gib": _gib(memory.used) if memory else None,
        "memory_free_gib": _gib(memory.free) if memory else None,
        "pstate": f"P{pstate}" if pstate is not None else None,
        "power_draw_w": _watts(_get(pynvml.nvmlDeviceGetPowerUsage, handle)),  # NVML reports mW
        "power_cap_w": _watts(_get(pynvml.nvmlDeviceGetEnforcedPowerLimit, handle)),
        "utilization_gpu_pct": util.gpu if util else None,
        "utilization_memory_pct": util.memory if util else None,
        "processes": _processes(pynvml, handle),
    }


def _processes(pynvml, handle) -> list[dict]:
    found = _get(pynvml.nvmlDeviceGetComputeRunningProcesses, handle) or []
    return [{"pid": p.pid, "name": _process_name(p.pid),
             "used_gib": _gib(p.usedGpuMemory) if p.usedGpuMemory is not None else None} for p in found]


def _process_name(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None  # another container's pid, or not Linux


def _gib(n_bytes: int) -> float:
    return round(n_bytes / GIB, 2)


def _watts(milliwatts: int | None) -> float | None:
    return None if milliwatts is None else round(milliwatts / 1000, 1)


def host_report() -> dict:
    """The CPU side: what a CPU engine (vLLM's CPU build, llama.cpp) runs on."""
    import psutil

    memory = psutil.virtual_memory()
    return {
        "cpu_model": _cpu_model(),
        "logical_cores": psutil.cpu_count(logical=True),
        "physical_cores": psutil.cpu_count(logical=False),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_total_gib": _gib(memory.total),
        "memory_available_gib": _gib(memory.available),
        "numa_nodes": _numa_nodes(),
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _numa_nodes() -> int | None:
    nodes = Path("/sys/devices/system/node")
    found = [p for p in nodes.glob("node[0-9]*")] if nodes.is_dir() else []
    return len(found) or None


def format_report(report: dict) -> str:
    lines = []
    if report["gpus"]:
        lines.append(f"driver {_na(report['driver_version'])}, CUDA {_na(report['cuda_version'])}")
        for gpu in report["gpus"]:
            lines += ["", *_gpu_lines(gpu)]
    else:
        lines.append(f"no GPU: {report['nvml_error']}")
    return "\n".join([*lines, "", *_host_lines(report["host"])])


def _gpu_lines(gpu: dict) -> list[str]:
    rows = [
        (f"gpu {gpu['index']}", f"{_na(gpu['name'])} (compute capability {_na(gpu['compute_capability'])})"),
        ("memory", (f"{_na(gpu['memory_used_gib'])} / {_na(gpu['memory_total_gib'])} GiB used, "
                    f"{_na(gpu['memory_free_gib'])} GiB free")),
        ("pstate", _na(gpu["pstate"])),
        ("power", f"{_na(gpu['power_draw_w'])} W of {_na(gpu['power_cap_w'])} W cap"),
        ("utilization", f"gpu {_na(gpu['utilization_gpu_pct'])} %, memory {_na(gpu['utilization_memory_pct'])} %"),
        ("processes", ", ".join(_proc_text(p) for p in gpu["processes"]) or "none"),
    ]
    return _aligned(rows)


def _proc_text(proc: dict) -> str:
    return f"{proc['pid']} {proc['name'] or '?'} ({_na(proc['used_gib'])} GiB)"


def _host_lines(host: dict) -> list[str]:
    cores = f"{host['logical_cores']} logical, {_na(host['physical_cores'])} physical"
    if host["usable_cores"] is not None and host["usable_cores"] != host["logical_cores"]:
        cores += f", {host['usable_cores']} usable here"
    return _aligned([
        ("cpu", host["cpu_model"]),
        ("cores", cores),
        ("memory", f"{host['memory_total_gib']} GiB total, {host['memory_available_gib']} GiB available"),
        ("numa nodes", _na(host["numa_nodes"])),
    ])


def _na(value) -> str:
    return "n/a" if value is None else str(value)


def _aligned(rows: list[tuple[str, str]]) -> list[str]:
    width = max(len(label) for label, _ in rows)
    return [f"{label:<{width}}  {value}" for label, value in rows]
