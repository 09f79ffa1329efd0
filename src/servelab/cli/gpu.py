"""``servelab gpu``: pre-flight check of the GPUs through NVML, or of the CPU when there is none.

The readings come from ``telemetry.gpu.gpu_check`` (NVML, module ``pynvml`` from
``nvidia-ml-py``, imported only when the command runs) and ``telemetry.host.host_report``;
this module prints them. A field a GPU does not support reads "n/a" (None in JSON)
instead of failing the whole check. No GPU or no NVML is not an error: the
command says so, describes the CPU host, and exits 0.
"""

from __future__ import annotations

import argparse
import json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def run(args: argparse.Namespace) -> int:
    from servelab.telemetry.gpu import gpu_check
    from servelab.telemetry.host import host_report

    report = {**gpu_check(), "host": host_report()}
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0


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
