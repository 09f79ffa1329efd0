"""A load sweep on one engine: the knee of the throughput curve, and the most load
that meets a latency SLO. The decisions are ``search.knee`` and ``search.slo``;
this module measures their points, each a study run (``Session``), so a rerun of
the same sweep keeps every point done and measures only what is missing.

    <results>/<name>/<engine>/c8/1/result.json …   one study run per load point
    <results>/<name>/sweep.json                    the summary; sweep-*.png: the curves
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path

from servelab.config import BenchSpec, OutputSpec

from servelab.spec_checks import check_saturation_rule, check_spec
from servelab.engines.spec import DEFAULT_PORT
from servelab.errors import InputError
from servelab.results import layout as files
from servelab.study import layout
from servelab.study.engine_runs import EngineRuns
from servelab.study.runner import runs_record
from servelab.study.session import Session
from servelab.study.entries import EngineEntry, Workload
from servelab.search.knee import Knee, climb, find_knee, rule_text
from servelab.search.points import Point, point_from_result
from servelab.search.slo import SLOResult, binding, search
from servelab.sweep.ladder_text import point_line, verdict_lines

# over -> (bench flag, what the tables call it, folder prefix, integer loads?)
LOADS = {"concurrency": ("--max-concurrency", "concurrency", "c", True),
         "rate": ("--request-rate", "request rate", "r", False)}
# What every point reports unless the workload says otherwise: p50 and p99 of E2EL too.
DEFAULT_METRICS = ("ttft", "tpot", "itl", "e2el")
DEFAULT_PERCENTILES = (50.0, 99.0)


@dataclass(frozen=True, slots=True)
class EnginePlan:
    """What a sweep, a tune and an optimization share: one base engine and workload, measured
    in runs under ``results/name`` (``EngineRuns``), each engine start warmed up first."""

    name: str
    engine: EngineEntry
    spec: BenchSpec  # the base workload (its argv: the flags as given, without the varied load)
    _: KW_ONLY
    results: Path = Path("results")
    warmup: int = 4
    port: int = DEFAULT_PORT
    verbose: bool = False

    @property
    def argv(self) -> tuple[str, ...]:
        return self.spec.argv

    @property
    def folder(self) -> Path:
        return self.results / self.name

    def engine_runs(self, engine: EngineEntry, origin: Path, source: dict, repeats: int = 1) -> EngineRuns:
        """The runs of one engine; ``source`` (what defines them) is kept as the origin's text."""
        return EngineRuns(name=self.name, results=self.results, engine=engine, warmup=self.warmup, port=self.port,
                          repeats=repeats, origin=origin, origin_text=json.dumps(source, indent=1))


@dataclass(frozen=True, slots=True)
class SweepPlan(EnginePlan):
    ladder: tuple[float, ...]
    over: str = "concurrency"
    min_gain: float = 0.05
    max_latency_growth: float = 0.20
    latency_key: str = "median_e2el"
    slo: dict[str, float] | None = None  # {"p99_ttft": ms, …} from search.slo.parse_slo
    rel_tol: float = 0.1
    max_bisect: int = 4
    plots: bool = True
    ladder_flag: str = "--stop"  # the flag that set the ladder's top, named in advice: --stop or --loads

    @property
    def load_name(self) -> str:
        return LOADS[self.over][1]


@dataclass(slots=True)
class SweepOutcome:
    plan: SweepPlan
    points: list[Point]  # every point measured, by load
    knee: Knee  # over every point measured (its indices are into ``points``)
    ladder_points: list[Point]
    slo: SLOResult | None = None
    plots: list[Path] = field(default_factory=list)
    folders: dict[float, str] = field(default_factory=dict)  # load -> its run folder
    over_saturated: float | None = None  # --stop-when-saturated: the load whose run was judged so (the last run)

    @property
    def judged(self) -> bool:
        """Can the knee be named? Only once a step saturated or the whole ladder was measured
        (an SLO search stops at its first failing load, possibly below the knee)."""
        top = self.ladder_points[-1].load if self.ladder_points else None
        return self.knee.saturated or top == self.plan.ladder[-1]

    @property
    def operating(self) -> Point | None:
        k = self.knee
        return self.points[k.operating_index] if self.judged and k.operating_index is not None else None

    @property
    def saturated_at(self) -> Point | None:
        return self.points[self.knee.saturated_index] if self.knee.saturated else None

    @property
    def not_run(self) -> list[float]:
        """The ladder's loads that were never measured (``not_run_why`` says why)."""
        measured = {p.load for p in self.points}
        return [x for x in self.plan.ladder if x not in measured]

    @property
    def not_run_why(self) -> str | None:
        """Why the ladder's top loads were not run: the one rule that ended the ladder."""
        if not self.not_run:
            return None
        name, top = self.plan.load_name, self.ladder_points[-1].load if self.ladder_points else None
        if self.over_saturated is not None:
            return f"{name} {self.over_saturated:g} was judged over-saturated (--stop-when-saturated)"
        if self.slo is not None:
            return (f"the SLO search stops at the first ladder load that misses the SLO ({name} {top:g}) and "
                    "bisects below it; a higher load is taken to miss it too")
        if self.knee.saturated:
            return f"the knee ended the climb ({name} {self.saturated_at.load:g} saturated)"
        return "the sweep ended before them"

    @property
    def stopped_early(self) -> bool:
        """The knee ended the climb before the ladder's top (an SLO search stops on its own rule)."""
        return (self.slo is None and self.knee.saturated and bool(self.ladder_points)
                and self.ladder_points[-1].load < self.plan.ladder[-1])


def workload_spec(spec: BenchSpec, slo: dict[str, float] | None) -> BenchSpec:
    """The base workload with the sweep's defaults: p50/p99 of every latency, and the SLO
    as bench's ``--goodput`` (requests meeting it per second) when one is given — each
    where the workload left bench's default. Each is shown in ``argv`` (provenance) as
    the flag it stands for; the run's identity is the spec itself."""
    out, extra, default = spec.output, [], OutputSpec()
    if out.percentile_metrics == default.percentile_metrics:
        out = dataclasses.replace(out, percentile_metrics=DEFAULT_METRICS)
        extra += ["--percentile-metrics", ",".join(DEFAULT_METRICS)]
    if out.metric_percentiles == default.metric_percentiles:
        out = dataclasses.replace(out, metric_percentiles=DEFAULT_PERCENTILES)
        extra += ["--metric-percentiles", ",".join(f"{p:g}" for p in DEFAULT_PERCENTILES)]
    goodput = {k.split("_", 1)[1]: v for k, v in (slo or {}).items() if not k.endswith("_itl")}
    if goodput and not out.goodput:
        out = dataclasses.replace(out, goodput=tuple(goodput.items()))
        extra += ["--goodput", *(f"{k}:{v:g}" for k, v in goodput.items())]
    # --stop-when-saturated: each point's run is judged, never cut short; the ladder stops (run_sweep)
    load = dataclasses.replace(spec.load, saturation="judge") if spec.load.saturation == "stop" else spec.load
    return dataclasses.replace(spec, output=out, load=load, argv=(*spec.argv, *extra))


def measured_latencies(spec: BenchSpec) -> tuple[list[str], list[str]]:
    """What a run of this workload reports: (statistics, latencies) — mean/median/std and
    each of --metric-percentiles ("p99"), of each of --percentile-metrics ("ttft")."""
    out = workload_spec(spec, None).output
    pcts = [f"p{int(p) if int(p) == p else p}" for p in out.metric_percentiles]
    return ["mean", "median", "std", *pcts], list(out.percentile_metrics)


def check_latencies(spec: BenchSpec, keys: dict[str, str]) -> None:
    """Each latency the plan decides on ({key: the flag that named it}) must be one the
    runs report, or every comparison with it would be NaN and silently false."""
    stats, names = measured_latencies(spec)
    for key, flag in keys.items():
        if key not in {f"{stat}_{name}" for stat in stats for name in names}:
            raise InputError(f"{flag}: the runs do not report {key} (they report {'/'.join(stats)} of "
                             f"{', '.join(names)}); widen --percentile-metrics or --metric-percentiles")


def check_plan(plan: SweepPlan) -> None:
    check_latencies(plan.spec, {plan.latency_key: "--latency-key", **{k: "--slo" for k in plan.slo or {}}})
    if load_given(plan.spec, plan.over):
        raise InputError(f"{LOADS[plan.over][0]} is what this sweep varies: give the loads with --loads or "
                         "--start/--stop")
    if not plan.ladder or any(x <= 0 for x in plan.ladder):
        raise InputError("the load ladder needs at least one load, each > 0")
    if LOADS[plan.over][3] and any(x != int(x) for x in plan.ladder):
        raise InputError("concurrency loads must be whole numbers")
    check_saturation_rule(point_workload(plan, plan.ladder[0]).spec)  # before the engine starts


def load_given(spec: BenchSpec, over: str) -> bool:
    """Does the workload set the load a sweep or tune varies (bench's default: no cap, rate inf)?"""
    return spec.load.max_concurrency is not None if LOADS[over][3] else not math.isinf(spec.load.request_rate)


def point_workload(plan: SweepPlan, load: float) -> Workload:
    return load_workload(plan.spec, plan.over, load, plan.slo)


def load_workload(spec: BenchSpec, over: str, load: float, slo: dict[str, float] | None) -> Workload:
    """The base workload at one load, named for its folder: ``c8`` (concurrency), ``r2.5`` (rate)."""
    flag, name, prefix, integer = LOADS[over]
    value = str(int(load)) if integer else f"{load:g}"
    base = workload_spec(spec, slo)
    varied = {"max_concurrency": int(load)} if integer else {"request_rate": float(load)}
    at_load = dataclasses.replace(base, load=dataclasses.replace(base.load, **varied),
                                  argv=(*base.argv, flag, value))
    check_spec(at_load)  # a varied spec is checked as a parsed one is (e.g. a load below --workers)
    return Workload(f"{prefix}{value}", at_load, f"{name} {value}")


def sweep_runs(plan: SweepPlan) -> EngineRuns:
    """The sweep's engine and where its points go; each point is given its workload as it is measured."""
    source = {"sweep": plan.name, "over": plan.over, "argv": list(plan.argv), "ladder": list(plan.ladder)}
    return plan.engine_runs(plan.engine, plan.folder / files.SWEEP_FILE, source)


def run_sweep(plan: SweepPlan, say: Callable[[str], None] = print) -> SweepOutcome:
    """Measure the ladder (stopping once saturated) or search it for the SLO; write the summary."""
    check_plan(plan)
    integer = LOADS[plan.over][3]
    runs = sweep_runs(plan)
    with Session(runs, say, plan.verbose) as session:
        measure = _Measure(plan, session, say)
        slo = None
        try:
            if plan.slo:
                slo = search(measure, list(plan.ladder), plan.slo, integer, plan.rel_tol, plan.max_bisect)
            else:
                climb(measure, list(plan.ladder), plan.min_gain, plan.max_latency_growth, plan.latency_key)
        except _OverSaturated:  # the ladder ends after the first point judged over-saturated
            pass
    outcome = _outcome(plan, measure, slo)
    _write(plan, runs, measure.workloads, outcome)
    return outcome


class _OverSaturated(Exception):
    """A point's run was judged over-saturated under --stop-when-saturated: no higher load."""


class _Measure:
    """load -> Point, one study run each; remembers every point and its folder."""

    def __init__(self, plan: SweepPlan, session: Session, say) -> None:
        self.plan, self.session, self.say = plan, session, say
        self.over_saturated: float | None = None
        self.points: dict[float, Point] = {}
        self.folders: dict[float, str] = {}
        self.workloads: list[Workload] = []  # in the order measured: the sweep's study.json

    def __call__(self, load: float) -> Point:
        if load in self.points:
            return self.points[load]
        workload = point_workload(self.plan, load)
        self.workloads.append(workload)
        step = f"point {len(self.points) + 1} · {self.plan.load_name} {load:g}"
        kept = self.session.is_done(workload)
        if not kept:
            self.say(f"{step}: measuring")
        run = self.session.run(workload)
        point = point_from_result(load, run.result) if run.result else Point(load, 0.0, {}, errors=1)
        self.points[load], self.folders[load] = point, str(run.folder)
        self.say(f"{step}: {'kept from an earlier run: ' if kept else ''}{point_line(point, self.plan.latency_key)}")
        if self.plan.spec.load.saturation != "off" and _judged_saturated(run.result):
            self.over_saturated = load
            raise _OverSaturated
        return point


def _judged_saturated(result: dict | None) -> bool:
    """Did the run's stop rules (loadgen/watch.py) judge it over-saturated?"""
    rules = ((result or {}).get("servelab") or {}).get("stop_rules") or {}
    return bool(rules.get("saturated"))


def _outcome(plan: SweepPlan, measure: _Measure, slo: SLOResult | None) -> SweepOutcome:
    points = sorted(measure.points.values(), key=lambda p: p.load)
    ladder = [p for p in points if p.load in plan.ladder]
    # every point, bisection midpoints too: a plateau they found is where the knee is
    knee = find_knee(points, plan.min_gain, plan.max_latency_growth, plan.latency_key)
    return SweepOutcome(plan, points, knee, ladder, slo, folders=measure.folders, over_saturated=measure.over_saturated)


def _write(plan: SweepPlan, runs: EngineRuns, workloads: list[Workload], outcome: SweepOutcome) -> None:
    plan.folder.mkdir(parents=True, exist_ok=True)
    record = runs_record(runs.head(f"sweep over {plan.load_name}"), [plan.engine], workloads,
                         [(plan.engine.name, w.name) for w in workloads])
    layout.write_json_atomic(plan.folder / files.STUDY_FILE, record)
    if plan.plots:
        from servelab.sweep.plots import draw

        outcome.plots = draw(outcome, plan.folder)
    layout.write_json_atomic(plan.folder / files.SWEEP_FILE, summary(outcome))


# --- what is kept (what is shown: ladder_text.py) ---

def summary(outcome: SweepOutcome) -> dict:
    """``sweep.json``: the plan, every point, the verdicts, the plots."""
    plan, k, slo = outcome.plan, outcome.knee, outcome.slo
    return {
        "name": plan.name, "engine": plan.engine.name, "over": plan.over, "load_flag": LOADS[plan.over][0],
        "workload_argv": list(workload_spec(plan.spec, plan.slo).argv), "ladder": list(plan.ladder),
        "rule": rule_text(plan.min_gain, plan.max_latency_growth, plan.latency_key),
        "points": [_point_dict(p, outcome.folders.get(p.load)) for p in outcome.points],
        "knee": {"operating_load": outcome.operating.load if outcome.operating else None, "judged": outcome.judged,
                 "saturated_load": outcome.saturated_at.load if k.saturated else None,
                 "reason": k.reason, "stopped_early": outcome.stopped_early},
        "slo": None if slo is None else _slo_dict(slo, plan.slo or {}), "over_saturated_load": outcome.over_saturated,
        "not_run": {"loads": outcome.not_run, "why": outcome.not_run_why} if outcome.not_run else None,
        "verdict": verdict_lines(outcome), "plots": [str(p) for p in outcome.plots],
    }


def _point_dict(p: Point, folder: str | None) -> dict:
    return {"load": p.load, "output_throughput": p.throughput, "request_throughput": p.request_throughput,
            "request_goodput": p.goodput, "errors": p.errors, "completed": p.completed,
            "latency_ms": {k: v for k, v in p.latency_ms.items() if not math.isnan(v)}, "folder": folder}


def _slo_dict(r: SLOResult, limits: dict[str, float]) -> dict:
    bound = r.first_fail or r.best
    return {"limits_ms": limits, "rule": r.rule, "status": r.status,
            "best_load": r.best.load if r.best else None,
            "first_fail_load": r.first_fail.load if r.first_fail else None,
            "interpolated_load": r.interpolated_load, "binding_limit": binding(bound, limits) if bound else None,
            "evidence_loads": [p.load for p in r.evidence]}
