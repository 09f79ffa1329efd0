"""``servelab scale``: N replicas of one engine, one alone then all together, counted in
one common window (metrics/window.py) — per-replica and total throughput, and the
scaling efficiency against one replica alone, with the noise rule of ``compare``.

    plan = ScalePlan(name="scale", results=Path("results"), replicas=specs, spec=bench_spec)
    outcome = run_scale(plan)      # replicas started, measured, stopped; scale.json written

On disk (results/layout.py's names; each run folder is a normal bench run with a marker):

    <results>/<name>/scale.json                          this file's result
    <results>/<name>/replica-<i>/engine.log              each replica's engine
    <results>/<name>/replica-0/alone/<repeat>/           replica 0 alone, ``repeats`` times
    <results>/<name>/replica-<i>/together/1/             every replica at once

All replicas are started first (each with its share of cores or GPUs,
engines/replicas.py) and stay up until the end, so the replica measured alone has
the same neighbours, idle, as when all run. A replica that fails to start stops the
ones already started: none outlives servelab, and the one-line error names it and its
last log line. With ``plan.ray`` the replicas and their clients run on Ray nodes
(study/ray_scale.py); the counting here is the same.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from servelab.config import BenchSpec
from servelab.engines import EngineSpec, start_engine
from servelab.engines.ready import last_lines
from servelab.errors import EngineError, InputError
from servelab.results import layout
from servelab.study import scale_result
from servelab.study.facts import engine_context
from servelab.study.together import Job, JobRun, run_together

SCALE_FILE = "scale.json"
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
    ray: str | None = None  # a Ray cluster's address ("auto": the local one): replicas on its nodes (ray_scale.py)


@dataclass(frozen=True, slots=True)
class ScaleOutcome:
    result: dict
    path: Path


def run_scale(plan: ScalePlan, say: Callable[[str], None] = print) -> ScaleOutcome:
    """Start every replica, measure one alone ``repeats`` times, then all at once; stop them all."""
    if plan.repeats < 1:
        raise InputError("--repeats must be at least 1")
    with contextlib.ExitStack() as stack:
        if plan.ray is None:
            engines = start_replicas(plan, stack, say)
            contexts, runner, fleet = [engine_context(e) for e in engines], run_together, None
        else:
            from servelab.study.ray_scale import start_on_ray  # Ray is optional: imported only here

            fleet = start_on_ray(plan, stack, say)
            engines, contexts, runner = fleet.engines, fleet.contexts, fleet.run
        alone = [_measure(plan, engines[:1], contexts, ALONE, r, say, runner) for r in range(1, plan.repeats + 1)]
        together = _measure(plan, engines, contexts, TOGETHER, 1, say, runner)
    facts = {**plan_facts(plan), **({"ray": fleet.placement()} if fleet else {})}
    result = scale_result.build(facts, contexts, [a[0] for a in alone], together)
    path = layout.study_dir(plan.results, plan.name) / SCALE_FILE
    layout.write_json_atomic(path, result)
    return ScaleOutcome(result, path)


def machine_shares() -> tuple[list[int], list[str]]:
    """The cores this process may use, and the GPUs (CUDA_VISIBLE_DEVICES' list, else NVML's)."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return cores, [d.strip() for d in visible.split(",") if d.strip()]
    from servelab.telemetry.gpu import open_gpus

    gpus, _ = open_gpus()
    return cores, [str(d["index"]) for d in gpus.devices] if gpus else []


def replica_name(i: int) -> str:
    return f"replica-{i}"


def start_replicas(plan: ScalePlan, stack: contextlib.ExitStack, say) -> list:
    """Start each replica in turn; each is stopped when ``stack`` closes, however it closes."""
    engines = []
    for i, spec in enumerate(plan.replicas):
        folder = layout.engine_dir(plan.results, plan.name, replica_name(i))
        say(f"replica {i}: starting {spec.name} ({spec.kind}) on port {spec.port}{share_text(spec)}")
        try:
            engine = start_engine(spec, folder, progress=plan.progress)
        except (EngineError, InputError) as exc:
            raise EngineError(start_failure(i, spec, exc, folder / "engine.log", len(engines))) from None
        stack.callback(engine.stop)
        engines.append(engine)
    return engines


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


def _measure(plan: ScalePlan, engines: list, contexts: list[dict], phase: str, repeat: int, say,
             runner=run_together) -> list[JobRun]:
    """One run per engine, all released at one instant (by ``runner``: here, or on Ray nodes);
    each run folder marked done."""
    who = "replica 0 alone" if phase == ALONE else f"all {len(engines)} replicas at once"
    say(f"measuring {who}" + (f" (repeat {repeat}/{plan.repeats})" if phase == ALONE else ""))
    jobs = [_job(plan, i, engine, contexts[i], phase, repeat) for i, engine in enumerate(engines)]
    started = time.monotonic()
    runs = runner(jobs)
    for job, run in zip(jobs, runs):
        layout.write_marker(job.folder, {"phase": phase, "repeat": repeat, "exit_code": run.exit_code,
                                         "wall_s": round(time.monotonic() - started, 2)})
        say(f"  replica {run.replica}: {_ok_line(run)} → {job.folder}")
    return runs


def _job(plan: ScalePlan, i: int, engine, context: dict, phase: str, repeat: int) -> Job:
    folder = layout.run_dir(plan.results, plan.name, replica_name(i), phase, repeat)
    layout.clear(folder)
    spec = plan.spec
    server = dataclasses.replace(spec.server, base_url=engine.base_url, model=engine.model)
    output = dataclasses.replace(spec.output, save_result=True, append_result=False, result_dir=str(folder),
                                 result_filename=layout.RESULT_FILE, label=replica_name(i), progress=False)
    load = dataclasses.replace(spec.load, num_warmups=max(spec.load.num_warmups, plan.warmup))
    dataset = dataclasses.replace(spec.dataset, seed=run_seed(plan, i, phase, repeat))
    run_spec = dataclasses.replace(spec, server=server, output=output, load=load, dataset=dataset)
    scale = {"name": plan.name, "replica": i, "replicas": len(plan.replicas), "phase": phase, "repeat": repeat,
             "seed": dataset.seed}
    return Job(i, run_spec, {"engine": context, "scale": scale}, folder)


def run_seed(plan: ScalePlan, replica: int, phase: str, repeat: int) -> int:
    """Every run draws its own requests from the same workload definition (seed + an offset):
    engines cache prompts (vLLM's prefix cache, llama.cpp's prompt cache), and replica 0
    would otherwise serve the together run's prompts from what its alone runs cached."""
    run = repeat if phase == ALONE else plan.repeats + 1
    return plan.spec.seed + 1000 * run + replica


def _ok_line(run: JobRun) -> str:
    r = run.result
    return f"{r.get('completed', 0)} ok, {r.get('failed', 0)} failed · {r.get('output_throughput', 0):.1f} output tok/s (whole run)"


def plan_facts(plan: ScalePlan) -> dict:
    """What the result says about how it was run (provenance, beside each run's own)."""
    return {"name": plan.name, "replicas": len(plan.replicas), "repeats": plan.repeats, "warmup": plan.warmup,
            "argv": list(plan.spec.argv), "seed": plan.spec.seed}
