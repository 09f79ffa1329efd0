"""What a scale run is asked to do, and the names and facts both fleets (local, Ray) share:
below both, so neither fleet imports the other or the run that drives them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from servelab.config import BenchSpec
from servelab.engines import EngineSpec
from servelab.engines.ready import last_lines

ALONE, TOGETHER = "alone", "together"


@dataclass(frozen=True, slots=True)
class ScalePlan:
    name: str
    results: Path
    replicas: tuple[EngineSpec, ...]  # one spec per replica, ports and shares set (engines/replicas.py)
    spec: BenchSpec  # the workload every replica gets, in full
    repeats: int = 2  # replica 0 measured alone this many times: the noise of one replica
    warmup: int = 4  # unmeasured requests before each run (bench's --num-warmups, at least)
    progress: bool = True
    ray: str | None = None  # a Ray cluster's address ("auto": the local one): replicas on its nodes (scale/ray.py)


class Fleet(Protocol):
    """The replicas, started and serving, wherever they run: scale/local.LocalFleet (this
    machine) or scale/ray.RayFleet (Ray nodes). scale/run.py measures either the same way."""

    engines: list  # each with the base_url and model a client sends to
    contexts: list[dict]  # each engine's ``servelab.engine`` in the results

    def run(self, jobs: list) -> list:
        """One run per scale/local.Job, all released at one instant: their JobRuns, in order."""

    def placement(self) -> dict:
        """The scale result's keys on where the replicas ran (none for this machine)."""


def replica_name(i: int) -> str:
    return f"replica-{i}"


def share_text(spec: EngineSpec) -> str:
    """The replica's share of the machine, as set by engines/replicas.py."""
    shown = [f"{k}={v}" for k, v in spec.env.items() if k in ("VLLM_CPU_OMP_THREADS_BIND", "CUDA_VISIBLE_DEVICES")]
    if "--threads" in spec.args:
        shown.append(f"--threads {spec.args[spec.args.index('--threads') + 1]}")
    return f" ({', '.join(shown)})" if shown else ""


def start_failure(i: int, spec: EngineSpec, exc: Exception, log: Path, started: int) -> str:
    """One line: which replica, why, its last log line, and that the others were stopped."""
    why = (str(exc).splitlines() or [""])[0].split("; last log lines")[0]
    lines = [line for line in last_lines(log, 5) if not line.startswith("# servelab engine")]
    last = lines[-1].strip() if lines else "(nothing logged)"
    return (f"replica {i} ({spec.name}, port {spec.port}) failed to start: {why}; last log line: {last!r}; "
            f"stopped the {started} replica(s) already started (log: {log})")


def run_seed(plan: ScalePlan, replica: int, phase: str, repeat: int) -> int:
    """Every run draws its own requests from the same workload definition (seed + an offset):
    engines cache prompts (vLLM's prefix cache, llama.cpp's prompt cache), and replica 0
    would otherwise serve the together run's prompts from what its alone runs cached."""
    run = repeat if phase == ALONE else plan.repeats + 1
    return plan.spec.seed + 1000 * run + replica


def plan_facts(plan: ScalePlan) -> dict:
    """What the result says about how it was run (provenance, beside each run's own)."""
    return {"name": plan.name, "replicas": len(plan.replicas), "repeats": plan.repeats, "warmup": plan.warmup,
            "argv": list(plan.spec.argv), "seed": plan.spec.seed}


def machine_shares() -> tuple[list[int], list[str]]:
    """The cores this process may use, and the GPUs (CUDA_VISIBLE_DEVICES' list, else NVML's)."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return cores, [d.strip() for d in visible.split(",") if d.strip()]
    from servelab.telemetry.gpu import gpu_devices

    return cores, [str(d["index"]) for d in gpu_devices()]
