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
(scale/ray.py); the counting here is the same.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from servelab.errors import InputError
from servelab.results import layout
from servelab.scale import result as scale_result
from servelab.scale.local import Job, JobRun, start_local
from servelab.scale.plan import ALONE, TOGETHER, Fleet, ScalePlan, plan_facts, replica_name, run_seed


@dataclass(frozen=True, slots=True)
class ScaleOutcome:
    result: dict
    path: Path


def run_scale(plan: ScalePlan, say: Callable[[str], None] = print) -> ScaleOutcome:
    """Start every replica, measure one alone ``repeats`` times, then all at once; stop them all."""
    if plan.repeats < 1:
        raise InputError("--repeats must be at least 1")
    with contextlib.ExitStack() as stack:
        fleet = (_on_ray if plan.ray is not None else start_local)(plan, stack, say)
        alone = [_measure(plan, fleet, 1, ALONE, r, say) for r in range(1, plan.repeats + 1)]
        together = _measure(plan, fleet, len(fleet.engines), TOGETHER, 1, say)
    result = scale_result.build({**plan_facts(plan), **fleet.placement()}, fleet.contexts, [a[0] for a in alone],
                                together)
    path = layout.study_dir(plan.results, plan.name) / layout.SCALE_FILE
    layout.write_json_atomic(path, result)
    return ScaleOutcome(result, path)


def _on_ray(plan: ScalePlan, stack: contextlib.ExitStack, say) -> Fleet:
    """The replicas on Ray nodes (scale/ray.py): Ray is optional, so imported only here."""
    from servelab.scale.ray import start_on_ray

    return start_on_ray(plan, stack, say)


def _measure(plan: ScalePlan, fleet: Fleet, n: int, phase: str, repeat: int, say) -> list[JobRun]:
    """One run on each of the fleet's first ``n`` engines, all released at one instant (here,
    or on Ray nodes); each run folder marked done."""
    who = "replica 0 alone" if phase == ALONE else f"all {n} replicas at once"
    say(f"measuring {who}" + (f" (repeat {repeat}/{plan.repeats})" if phase == ALONE else ""))
    jobs = [_job(plan, i, fleet.engines[i], fleet.contexts[i], phase, repeat) for i in range(n)]
    started = time.monotonic()
    runs = fleet.run(jobs)
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
    load = dataclasses.replace(spec.load, num_warmups=max(spec.load.num_warmups, plan.warmup))
    dataset = dataclasses.replace(spec.dataset, seed=run_seed(plan, i, phase, repeat))
    run_spec = dataclasses.replace(spec.into(folder, layout.RESULT_FILE, replica_name(i), progress=False),
                                   server=server, load=load, dataset=dataset)
    scale = {"name": plan.name, "replica": i, "replicas": len(plan.replicas), "phase": phase, "repeat": repeat,
             "seed": dataset.seed}
    return Job(i, run_spec, {"engine": context, "scale": scale}, folder)


def _ok_line(run: JobRun) -> str:
    r = run.result
    return f"{r.get('completed', 0)} ok, {r.get('failed', 0)} failed · {r.get('output_throughput', 0):.1f} output tok/s (whole run)"
