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

from servelab.config import BenchSpec
from servelab.engines import EngineSpec, start_engine
from servelab.engines.engine import ENGINE_LOG
from servelab.errors import EngineError, InputError
from servelab.results import layout
from servelab.scale import result as scale_result
from servelab.measure.facts import engine_context
from servelab.scale.local import Job, JobRun, run_together
from servelab.scale.plan import (ALONE, TOGETHER, ScalePlan, plan_facts, replica_name, run_seed, share_text,
                                 start_failure)

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
            from servelab.scale.ray import start_on_ray  # Ray is optional: imported only here

            fleet = start_on_ray(plan, stack, say)
            engines, contexts, runner = fleet.engines, fleet.contexts, fleet.run
        alone = [_measure(plan, engines[:1], contexts, ALONE, r, say, runner) for r in range(1, plan.repeats + 1)]
        together = _measure(plan, engines, contexts, TOGETHER, 1, say, runner)
    facts = {**plan_facts(plan), **({"ray": fleet.placement()} if fleet else {})}
    result = scale_result.build(facts, contexts, [a[0] for a in alone], together)
    path = layout.study_dir(plan.results, plan.name) / layout.SCALE_FILE
    layout.write_json_atomic(path, result)
    return ScaleOutcome(result, path)


def start_replicas(plan: ScalePlan, stack: contextlib.ExitStack, say) -> list:
    """Start each replica in turn; each is stopped when ``stack`` closes, however it closes."""
    engines = []
    for i, spec in enumerate(plan.replicas):
        folder = layout.engine_dir(plan.results, plan.name, replica_name(i))
        say(f"replica {i}: starting {spec.name} ({spec.kind}) on port {spec.port}{share_text(spec)}")
        try:
            engine = start_engine(spec, folder, progress=plan.progress)
        except (EngineError, InputError) as exc:
            raise EngineError(start_failure(i, spec, exc, folder / ENGINE_LOG, len(engines))) from None
        stack.callback(engine.stop)
        engines.append(engine)
    return engines


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


def _ok_line(run: JobRun) -> str:
    r = run.result
    return f"{r.get('completed', 0)} ok, {r.get('failed', 0)} failed · {r.get('output_throughput', 0):.1f} output tok/s (whole run)"
