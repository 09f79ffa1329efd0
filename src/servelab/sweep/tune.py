"""Tune engine knobs: every combination of the knobs, each started once (a
``Session``) and measured at each load; the best few started again and repeated;
all ranked by a conservative score (``search.rank``).

Before a launch, a config that cannot fit is skipped (``search.fit``: the model's
own limits, the KV budget an earlier start reported). A config whose engine
fails to start (or dies) is recorded as infeasible with its last log lines, and
the search goes on. Everything is a study run, so a rerun keeps what is done.

    <results>/<name>/<config>/<load>/<repeat>/result.json …   one study run each
    <results>/<name>/<config>/engine.log, infeasible.json      a failed start
    <results>/<name>/tune.json, tune.md                        the ranking, the winner
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from servelab.engines import EngineSpec
from servelab.engines.embedded import as_vllm
from servelab.engines.engine import ENGINE_LOG
from servelab.engines.kinds import serve_command
from servelab.engines.ready import last_lines
from servelab.errors import EngineError, InputError
from servelab.results import layout as files
from servelab.study import layout
from servelab.study.engine_runs import EngineRuns
from servelab.study.runner import runs_record
from servelab.study.session import Session, SessionRun, resolve_spec
from servelab.study.entries import EngineEntry, Workload
from servelab.sweep.ladder import LOADS, EnginePlan, check_latencies, load_given, load_workload
from servelab.search.fit import Budget, Settings, misfit, settings_of
from servelab.search.knobs import Knob, config_name, configs, knob_flags, model_of
from servelab.search.points import Point, point_from_result
from servelab.search.rank import ConfigRuns, Ranked, rank_configs, rule_text, top
from servelab.telemetry.gpu import gpu_devices

LOG_TAIL = 15


@dataclass(frozen=True, slots=True)
class TunePlan(EnginePlan):
    """``engine``: the base engine, to which each config adds its knob flags."""

    knobs: tuple[Knob, ...]
    loads: tuple[float, ...]
    over: str = "concurrency"
    slo: dict[str, float] | None = None
    objective: str = "throughput"
    top: int = 2
    repeats: int = 2


@dataclass(frozen=True, slots=True)
class Candidate:
    name: str
    choice: dict[str, str]  # knob -> value
    entry: EngineEntry
    spec: EngineSpec  # as it would launch
    settings: Settings
    runs: EngineRuns  # where its runs go, and how they are numbered


@dataclass(slots=True)
class Trial:
    """What one config gave: its runs, or why it has none."""

    candidate: Candidate
    status: str = "ran"  # "ran" | "skipped" | "infeasible"
    note: str = ""
    log_tail: list[str] = field(default_factory=list)
    runs: list[tuple[Point, str]] = field(default_factory=list)  # (point, run folder)

    def config_runs(self) -> ConfigRuns:
        return ConfigRuns(self.candidate.name, tuple(p for p, _ in self.runs), self.status, self.note)


@dataclass(slots=True)
class TuneOutcome:
    plan: TunePlan
    ranked: list[Ranked]
    trials: dict[str, Trial]
    command: str | None  # the winner's serve command line
    report: Path | None = None

    @property
    def winner(self) -> Ranked | None:
        return self.ranked[0] if self.ranked and self.ranked[0].verdict == "meets" else None


# --- the configs ---

def candidates(plan: TunePlan) -> list[Candidate]:
    if plan.engine.spec is not None and plan.engine.spec.kind == "external":
        raise InputError("tune starts each config's engine itself: an external server cannot take knobs")
    out = [_candidate(plan, choice) for choice in configs(list(plan.knobs))]
    names = [c.name for c in out]
    if len(set(names)) != len(names):
        raise InputError("two configs share a folder name (two model paths with the same last folder?)")
    return out


def _candidate(plan: TunePlan, choice: dict[str, str]) -> Candidate:
    entry = config_entry(plan.engine, choice)
    spec = resolve_spec(entry, plan.port if entry.port is None else entry.port)
    return Candidate(entry.name, choice, entry, spec, settings_of(spec), tune_runs(plan, entry))


def config_entry(base: EngineEntry, choice: dict[str, str]) -> EngineEntry:
    """The base engine plus this combination's flags (and model, for a quantized variant)."""
    name, flags, model = config_name(choice), tuple(knob_flags(choice)), model_of(choice)
    spec = base.spec
    if model is not None and spec.kind == "embedded":
        spec = as_vllm(spec)  # a model knob replaces its model: the plain vLLM spec it runs
    elif model is not None and spec.kind not in ("vllm", "llamacpp"):
        raise InputError(f"--knob model needs a vllm or llamacpp engine, not {spec.kind}")
    spec = dataclasses.replace(spec, name=name, model=model or spec.model, args=(*spec.args, *flags))
    return dataclasses.replace(base, name=name, spec=spec, args=spec.args, env=spec.env)


# --- the study they run in ---

def workloads(plan: TunePlan) -> list[Workload]:
    return [load_workload(plan.spec, plan.over, load, plan.slo) for load in plan.loads]


def tune_runs(plan: TunePlan, entry: EngineEntry) -> EngineRuns:
    """One config's runs: repeat 1 for every config, up to ``plan.repeats`` for the top ones."""
    source = {"tune": plan.name, "argv": list(plan.argv), "loads": list(plan.loads),
              "knobs": {k.name: list(k.values) for k in plan.knobs}}
    return plan.engine_runs(entry, plan.folder / files.TUNE_FILE, source, repeats=plan.repeats)


def run_tune(plan: TunePlan, say: Callable[[str], None] = print) -> TuneOutcome:
    """Every config once at every load; the top ``plan.top`` repeated; ranked; reported."""
    _check(plan)
    cands = candidates(plan)
    trials: dict[str, Trial] = {}
    for i, cand in enumerate(cands, 1):
        say(f"config {i}/{len(cands)} {cand.name}")
        trials[cand.name] = _first(plan, cand, _budget(cands), say)
    ranked = _repeat_top(plan, trials, say)
    outcome = TuneOutcome(plan, ranked, trials, None)
    if outcome.winner is not None:
        outcome.command = serve_command(trials[outcome.winner.name].candidate.spec)
    _write(plan, cands, outcome)
    return outcome


def _check(plan: TunePlan) -> None:
    if load_given(plan.spec, plan.over):
        raise InputError(f"{LOADS[plan.over][0]} is the load tune sets: give it with --loads")
    if not plan.loads or plan.top < 1 or plan.repeats < 1:
        raise InputError("tune needs at least one load, --top >= 1 and --repeats >= 1")
    if plan.objective == "goodput" and not plan.slo:
        raise InputError("--objective goodput needs --slo (goodput counts requests meeting it)")
    check_latencies(plan.spec, {k: "--slo" for k in plan.slo or {}})


def _first(plan: TunePlan, cand: Candidate, budget: Budget | None, say) -> Trial:
    """Repeat 1 at every load — unless it is known infeasible, or cannot fit."""
    trial = Trial(cand)
    known = _recorded_infeasible(plan, cand)
    if known is not None:
        say(f"  infeasible (recorded earlier; delete {cand.runs.folder} to retry): {known['reason']}")
        return dataclasses.replace(trial, status="infeasible", note=known["reason"], log_tail=known["log_tail"])
    done = all(layout.is_done(cand.runs, w, 1) for w in workloads(plan))
    why = None if done else misfit(cand.settings, budget)
    if why:
        say(f"  skipped before launch: {why}")
        return dataclasses.replace(trial, status="skipped", note=why)
    return _measure(plan, trial, [1], say)


def _repeat_top(plan: TunePlan, trials: dict[str, Trial], say) -> list[Ranked]:
    """Repeat the top configs until the top ``plan.top`` are all repeated: a repeat can
    reorder the ranking (its spread lowers a score), and the winner must be a repeated one."""
    repeated: set[str] = set()
    while True:
        ranked = rank_configs([t.config_runs() for t in trials.values()], plan.slo, plan.objective)
        todo = [r for r in top(ranked, plan.top) if r.name not in repeated] if plan.repeats > 1 else []
        if not todo:
            return ranked
        for r in todo:
            say(f"repeat {r.name} ({plan.repeats} runs per load): one of the top {plan.top}")
            _repeat(plan, trials[r.name], say)
            repeated.add(r.name)


def _repeat(plan: TunePlan, trial: Trial, say) -> None:
    more = _measure(plan, Trial(trial.candidate), list(range(2, plan.repeats + 1)), say)
    trial.runs += more.runs
    if more.status != "ran":  # it ran before; note why the repeats are missing
        trial.note = f"repeats failed: {more.note}"


def _measure(plan: TunePlan, trial: Trial, repeats: list[int], say) -> Trial:
    loads = dict(zip([w.name for w in workloads(plan)], plan.loads))
    try:
        with Session(trial.candidate.runs, say, plan.verbose) as session:
            for workload in workloads(plan):
                for repeat in repeats:
                    run = session.run(workload, repeat)
                    trial.runs.append(_point(run, loads[workload.name], plan, say))
    except EngineError as exc:
        return _infeasible(plan, trial, exc, say)
    return trial


def _point(run: SessionRun, load: float, plan: TunePlan, say) -> tuple[Point, str]:
    point = point_from_result(load, run.result) if run.result else Point(load, 0.0, {}, errors=1)
    kept = "kept from an earlier run: " if run.kept else ""
    say(f"  {LOADS[plan.over][1]} {load:g} repeat {run.key.repeat}: {kept}{point.throughput:.1f} out tok/s, "
        f"p99 TTFT {point.latency('p99_ttft'):.0f} ms, {point.errors} errors")
    return point, str(run.folder)


def _infeasible(plan: TunePlan, trial: Trial, exc: EngineError, say) -> Trial:
    """The engine failed to start (or died): record why, with its last log lines, and go on."""
    runs = trial.candidate.runs
    folder = runs.folder
    tail = last_lines(folder / ENGINE_LOG, LOG_TAIL)
    said = [line for line in tail if not line.startswith("# servelab engine")]  # not our header
    reason = str(exc).split("\n", 1)[0].split("; last log lines", 1)[0].rstrip(":; ")
    reason = reason.removeprefix(f"engine {trial.candidate.name!r} ")  # the row already names it
    reason += f": {said[-1].strip()}" if said else ""
    # the hash of the config's first run: a changed config or workload is tried again
    first = layout.run_hash(runs.engine, workloads(plan)[0].spec)
    layout.write_json_atomic(folder / files.INFEASIBLE_FILE, {"reason": reason, "log_tail": tail, "config_hash": first})
    say(f"  infeasible: {reason}")
    return dataclasses.replace(trial, status="infeasible", note=reason, log_tail=tail)


def _recorded_infeasible(plan: TunePlan, cand: Candidate) -> dict | None:
    try:
        known = json.loads((cand.runs.folder / files.INFEASIBLE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return known if layout.same_definition(cand.runs, workloads(plan)[0], known.get("config_hash")) else None


# --- the KV budget an earlier start reported ---

def _budget(cands: list[Candidate]) -> Budget | None:
    """From the first config (in order) that started and logged its KV cache size."""
    for cand in cands:
        facts = _engine_facts(cand.runs)
        tokens = (facts.get("memory_report") or {}).get("kv_cache_tokens")
        if tokens:
            report = facts["memory_report"]
            s = cand.settings
            return Budget(int(tokens), report.get("kv_cache_gib"), s.gpu_memory_utilization, _device_gib(),
                          s.model, s.kv_cache_dtype)
    return None


def _engine_facts(runs: EngineRuns) -> dict:
    try:
        return json.loads((runs.folder / files.ENGINE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _device_gib() -> float | None:
    """The first GPU's memory (NVML); None on a CPU machine — then utilization changes are not estimated."""
    return next((d["memory_total_gib"] for d in gpu_devices()), None)


def _write(plan: TunePlan, cands: list[Candidate], outcome: TuneOutcome) -> None:
    from servelab.sweep.report import markdown, summary

    plan.folder.mkdir(parents=True, exist_ok=True)
    loads = workloads(plan)
    head = tune_runs(plan, plan.engine).head(f"tune {', '.join(k.name for k in plan.knobs)}")
    record = runs_record(head, [c.entry for c in cands], loads, [(c.name, w.name) for c in cands for w in loads])
    layout.write_json_atomic(plan.folder / files.STUDY_FILE, record)
    layout.write_json_atomic(plan.folder / files.TUNE_FILE, summary(outcome))
    outcome.report = plan.folder / files.TUNE_REPORT_FILE
    outcome.report.write_text(markdown(outcome), encoding="utf-8")


def rule(plan: TunePlan) -> str:
    return rule_text(plan.objective, plan.slo or {})
