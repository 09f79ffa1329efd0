"""What an optimization is (``OptimizePlan``: the engine, the fixed workload, the objective
and the budget) and the parts of ``optimize.json`` that follow from it alone: its head,
the check before launching, and the final section built from the best verified step.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shlex
from dataclasses import dataclass
from datetime import datetime, timezone
from types import SimpleNamespace

from servelab import __version__
from servelab.engines.kinds import kind_of, serve_command
from servelab.engines.spec import DEFAULT_PORT, flag_value
from servelab.errors import InputError
from servelab.optimize import record as rec
from servelab.optimize.config import Config, served_args
from servelab.study import layout
from servelab.study.entries import EngineEntry
from servelab.sweep.ladder import EnginePlan


@dataclass(frozen=True, slots=True)
class OptimizePlan(EnginePlan):
    """``spec``: the fixed workload; its --max-concurrency and --workers start the free variables."""

    kind: str  # the knob table's engine kind: vllm, vllm-cpu, llamacpp, sim, command, external
    objective: str = "throughput"
    slo: dict[str, float] | None = None
    repeats: int = 2
    budget_runs: int | None = None
    budget_minutes: float | None = None
    simulate_first: bool = False
    knobs: tuple[str, ...] | None = None  # a command engine: the flags its user says exist
    fast: bool = False  # every run in the simulator's fast mode (``--engine sim --simulate``)
    operating_point: bool = True
    plan_check: dict | None = None
    alternative_models: tuple[str, ...] = ()  # checkpoints to try instead of the base (--alternative-model)
    from_command: tuple[str, ...] = ()  # a command engine: the knob flags its command line set (own_flags)
    device: tuple[str, float | None] | None = None  # the GPU a vLLM engine serves from (name, GiB): its defaults

    @property
    def base_config(self) -> Config:
        load = self.spec.load
        workers = load.workers if load.workers and load.workers > 1 else None
        return Config(tuple(self.engine.spec.args), dict(self.engine.spec.env), load.max_concurrency, workers)

    @property
    def base_model(self) -> str:
        """The model as the user gave it (the embedded engine: its name): a model change's ``from``."""
        return self.engine.spec.model or self.engine.spec.name


def own_flags(plan: OptimizePlan) -> OptimizePlan:
    """A command engine's knobs as its command line sets them (``--max-num-seqs 4``) become the
    configuration's flags: the loop then steps from that value (4 → 8, not vLLM's default), the
    diagnosis reads it as the engine's own (its result records the flags), and a change replaces
    the flag instead of appending a second one to the command."""
    spec = plan.engine.spec
    if plan.kind != "command" or not plan.knobs:
        return plan
    command, moved, found = list(spec.command), [], []
    for knob in plan.knobs:
        flag = "--" + knob
        value = flag_value(command, flag)
        if value is not None:
            command = _without_flag(command, flag)
            moved += [flag, value]
            found.append(flag)
    if not found:
        return plan
    args = (*moved, *spec.args)
    engine = dataclasses.replace(plan.engine, spec=dataclasses.replace(spec, command=tuple(command), args=args),
                                 args=args)
    return dataclasses.replace(plan, engine=engine, from_command=tuple(found))


def _without_flag(argv: list[str], flag: str) -> list[str]:
    """The argv less every ``flag V`` and ``flag=V``."""
    return [a for a in _without(argv, (flag,)) if not a.startswith(flag + "=")]


def check(plan: OptimizePlan) -> None:
    if plan.repeats < 2:
        raise InputError("--repeats must be at least 2: compare's noise rule needs two runs a side")
    if plan.budget_runs is not None and plan.budget_runs < plan.repeats:
        raise InputError(f"--budget-runs {plan.budget_runs} cannot pay for the baseline's {plan.repeats} runs")
    if plan.objective == "goodput" and not plan.slo:
        raise InputError("--objective goodput needs --slo (goodput counts requests meeting it)")
    if plan.kind == "command" and not plan.knobs:
        raise InputError("a command engine needs --knobs NAME,NAME (the flags it takes, e.g. max-num-seqs)")
    check_models(plan)


MODEL_KINDS = ("vllm", "vllm-cpu", "sim")  # the knob tables that offer a model change (diagnose/changes.py)


def check_models(plan: OptimizePlan) -> None:
    """--alternative-model needs an engine servelab restarts, and another model than the one served."""
    if not plan.alternative_models:
        return
    if plan.kind == "external":
        raise InputError("--alternative-model needs an engine servelab starts: an external server cannot be "
                         "restarted with another model")
    if plan.kind not in MODEL_KINDS:
        raise InputError(f"--alternative-model is offered for vLLM, its CPU build and the sim engine, not "
                         f"--engine {plan.engine.spec.kind}")
    same = [m for m in plan.alternative_models if m == plan.base_model]
    if same:
        raise InputError(f"--alternative-model {same[0]} is the model already served: name another checkpoint")


def definition(plan: OptimizePlan) -> str:
    """What a rerun must match to replay the record: engine, workload, objective, repeats, knobs.
    The budget is left out on purpose: a rerun with a larger budget goes on from where it stopped."""
    e = plan.engine.spec
    what = {"engine": [e.kind, e.model, list(e.args), sorted(e.env.items()), list(e.command)],
            "workload": layout.canonical(plan.spec, frozenset({"argv", "output"})), "objective": plan.objective,
            "slo": plan.slo, "repeats": plan.repeats, "kind": plan.kind, "knobs": plan.knobs, "fast": plan.fast,
            "simulate_first": plan.simulate_first}
    if plan.alternative_models:  # only when given: the records written before it still resume
        what["alternative_models"] = list(plan.alternative_models)
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:16]


def head(plan: OptimizePlan) -> dict:
    """The record before any step: what is fixed, what is free, the budget and the noise rule."""
    d, load = plan.spec.dataset, plan.spec.load
    fixed = {"dataset": d.name, "input_len": _len(d, "input"), "output_len": _len(d, "output"),
             "num_prompts": d.num_prompts, "request_rate": load.request_rate, "seed": d.seed,
             "argv": list(plan.spec.argv)}
    e = plan.engine.spec
    return {
        "schema": rec.SCHEMA, "name": plan.name, "definition": definition(plan),
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"), "servelab_version": __version__,
        "objective": {"kind": plan.objective, "slo": plan.slo, "why": "set after the baseline"},
        "engine": {"kind": plan.kind, "model": e.model or e.name, "restartable": plan.kind != "external",
                   "simulated": plan.fast or plan.kind == "sim"},
        "workload": {"fixed": fixed, "free": ["client max_concurrency", "client workers"]},
        "plan_check": None, "baseline": None, "steps": [], "final": None, "operating_point": None,
        "next": None, "stopped_because": None,
        "operating_point_skipped": None if plan.operating_point else "--no-operating-point",
        "budget": {"runs_used": 0, "runs_limit": plan.budget_runs, "minutes_used": 0.0,
                   "minutes_limit": plan.budget_minutes, "engine_starts": 0, "simulated_runs": 0},
        "limits": limits(plan), "noise": rec.noise_rule(plan.repeats, plan.objective),
    }


def _len(d, which: str):
    return getattr(d, f"random_{which}_len", None) if d.name == "random" else None


def limits(plan: OptimizePlan) -> list[str]:
    out = [f"fixed: the workload ({plan.spec.dataset.name}, {plan.spec.dataset.num_prompts} prompts, seed "
           f"{plan.spec.dataset.seed}, request rate {plan.spec.load.request_rate:g}); free: the client's "
           "--max-concurrency and --workers, reported beside the engine's flags",
           f"{plan.repeats} repeats per configuration, each configuration on one engine start: start-to-start "
           "noise is covered only by the floor of compare's rule",
           "one change at a time, in the knob table's order (a change that moved the limit is tried once more "
           "with the next limit's change): changes that help only three at a time are not found",
           "a knob the table does not list for a verdict is never tried"]
    if plan.fast or plan.kind == "sim":
        out.insert(0, "SIMULATED: every number is servelab's vLLM V1 scheduler model, not a measurement; "
                      "expect the real engine to differ (docs/sim.md states the model's error)")
    if plan.kind == "external":
        out.insert(0, "external server: servelab cannot restart it, so only the client's side was optimised")
    if plan.simulate_first:
        out.append("--simulate-first: candidates were ranked on the simulator first; steps marked simulated "
                   "were never measured, and a change the model cannot see (memory, dtype) is measured unranked")
    return out


def plan_check(engine: EngineEntry, port: int) -> dict | None:
    """Does the engine fit, and how many requests of the workload at once? None: nothing to plan."""
    from servelab.planner.fit import does_not_fit
    from servelab.planner.predict import plan_for_engine
    from servelab.study.session import resolve_spec

    if engine.spec.kind not in ("vllm", "llamacpp", "embedded"):
        return None
    spec = resolve_spec(engine, port)
    planned = plan_for_engine(SimpleNamespace(spec=spec, kind=kind_of(spec)))
    if planned is None:
        return None
    if not planned.fits:
        raise InputError(does_not_fit(planned))
    return {"fits": True, "max_concurrency": round(planned.max_concurrency, 2),
            "line": f"fits: KV cache {planned.kv_tokens:,} tokens, {planned.max_concurrency:.2f} requests of "
                    f"{planned.context_tokens:,} tokens at once"}


def final_section(plan: OptimizePlan, best: dict, operating: dict | None = None) -> dict:
    """``final`` (the best verified configuration as a serve line, with the client's settings)
    and ``next`` (the scale command that checks N replicas of it, each at the operating point's
    concurrency when one was found, else at the final client's)."""
    config = Config.from_dict(best["config"])
    at = config
    if operating and operating.get("load") is not None and operating.get("over", "concurrency") == "concurrency":
        at = dataclasses.replace(config, max_concurrency=int(operating["load"]))
    return {"final": {**config.to_dict(), "output_tok_s": best["result"]["output_tok_s"],
                      "serve_command": serve_line(plan, config), "from_step": best["n"]},
            "next": {"scale_command": scale_line(plan, at),
                     "at": "the operating point" if at is not config else "the final client settings"}}


def serve_line(plan: OptimizePlan, config: Config) -> str:
    if plan.kind == "external":
        return "(an external server: not restarted; only the client's settings changed)"
    args = served_args(config, plan.engine.spec.kind)
    spec = dataclasses.replace(plan.engine.spec, args=args, env=config.env)
    if plan.fast or spec.kind == "sim":  # the knobs to try on a real engine
        return serve_command(dataclasses.replace(spec, kind="sim"))
    if spec.kind == "embedded":
        spec = kind_of(spec).resolve(spec)
    if config.model is not None:
        spec = dataclasses.replace(spec, model=config.model)  # the checkpoint measured, not the base
    return serve_command(spec)


def scale_line(plan: OptimizePlan, config: Config) -> str:
    client = [f"--max-concurrency {config.max_concurrency}"] if config.max_concurrency else []
    client += [f"--workers {config.workers}"] if config.workers else []
    env = [f"--env {shlex.quote(k + '=' + v)}" for k, v in sorted(config.env.items())]
    kind = plan.engine.spec.kind
    if kind == "embedded" and config.model is not None:
        kind = "vllm"  # the embedded engine serves its own model only: another is vLLM's with --model
    engine = "" if kind == "embedded" else f" --engine {kind}"
    argv = _without_client(plan.spec.argv)
    if config.model is not None and plan.engine.spec.kind != "sim":
        argv = [*_without(argv, ("--model",)), "--model", config.model]  # the checkpoint kept
    workload = " ".join(shlex.quote(a) for a in argv)
    served = list(served_args(config, plan.engine.spec.kind))
    where = [] if plan.port == DEFAULT_PORT else [f"--port {plan.port}"]  # the port the engine was measured on
    if kind == "command":  # its own command line, each replica on its port (scale fills {port})
        port = str(plan.port)
        served = ["{port}" if a == port else a for a in (*plan.engine.spec.command, *served)]
        url = plan.engine.spec.ready_url
        where += [f"--ready-url {shlex.quote(url.replace(':' + port, ':{port}'))}"] if url else []
    args = f" -- {shlex.join(served)}" if served else ""
    parts = (f"servelab scale --replicas 2{engine}", *where, workload, *client, *env)
    return " ".join(x for x in parts if x) + args


def _without_client(argv: tuple[str, ...]) -> list[str]:
    """The workload's flags less the client's free variables (given anew) and --simulate."""
    return [a for a in _without(argv, ("--max-concurrency", "--workers")) if a != "--simulate"]


def _without(argv, flags: tuple[str, ...]) -> list[str]:
    """The argv less each of ``flags`` and its value."""
    drop = {i for i, a in enumerate(argv) if a in flags}
    drop |= {i + 1 for i in drop}
    return [a for i, a in enumerate(argv) if i not in drop]
