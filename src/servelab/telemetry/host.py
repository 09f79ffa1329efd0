"""What this machine is: its CPU model, cores, memory and NUMA nodes, read from psutil,
``/proc`` and ``/sys``. A CPU engine (vLLM's CPU build, llama.cpp) runs on this, and a
result's hardware facts and ``servelab gpu`` describe it. (Whether the machine was
*shared* during a run is ``machine.py``'s question.)
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

GIB = 2**30


def host_report() -> dict:
    """The CPU side, for ``servelab gpu``: model, cores (and how many this process may use), memory, NUMA."""
    import psutil

    memory = psutil.virtual_memory()
    return {
        "cpu_model": cpu_model(),
        "logical_cores": psutil.cpu_count(logical=True),
        "physical_cores": psutil.cpu_count(logical=False),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_total_gib": round(memory.total / GIB, 2),
        "memory_available_gib": round(memory.available / GIB, 2),
        "numa_nodes": _numa_nodes(),
    }


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """/proc/cpuinfo's "model name"; off Linux, what ``platform`` knows."""
    try:
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def process_name(pid: int) -> str | None:
    """The command name of ``pid``, or None: another container's pid, or not Linux."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def _numa_nodes() -> int | None:
    nodes = Path("/sys/devices/system/node")
    found = list(nodes.glob("node[0-9]*")) if nodes.is_dir() else []
    return len(found) or None
