"""``servelab tune --simulate``: every knob combination through the simulator's fast
mode, before any engine starts — a pre-ranking to prune the configurations worth the
real engine's time. Each combination runs at each load in well under a second; the
table says SIMULATED, and that the real tune decides. With ``--slo`` the table shows the
limits and, per configuration, at how many loads it met them; the table and every point
are saved as ``presim.md`` / ``presim.json`` in the tune's results folder.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from servelab.spec_checks import check_spec
from servelab.errors import InputError
from servelab.sim.options import SIMULABLE, engine_from_flags
from servelab.measure.run import execute
from servelab.results.layout import PRESIM_FILE, PRESIM_REPORT_FILE
from servelab.results.store import finite
from servelab.sweep.ladder import LOADS, load_workload
from servelab.search.knobs import config_name, configs, knob_flags
from servelab.search.points import Point, point_from_result
from servelab.search.slo import meets, text as slo_text

@dataclass(frozen=True, slots=True)
class Ranked:
    name: str
    best: Point | None  # the best-scoring load that meets the SLO; None: none does
    points: tuple[Point, ...]


def simulated_flags(choice: dict[str, str]) -> list[str]:
    """A combination's knobs as the simulated engine's (vLLM-named) flags; one it does not model is refused."""
    bad = [name for name in choice if name not in SIMULABLE]
    if bad:
        raise InputError(f"--knob {bad[0]} cannot be simulated (the simulator models {', '.join(SIMULABLE)}); "
                         "drop it, or tune without --simulate")
    return knob_flags(choice)


def rank(plan) -> list[Ranked]:
    """Best first; configurations that never meet the SLO last."""
    ranked = []
    for choice in configs(list(plan.knobs)):
        points = tuple(measure(plan, choice, load) for load in plan.loads)
        fine = [p for p in points if meets(p, plan.slo or {})]
        ranked.append(Ranked(config_name(choice), max(fine, key=lambda p: score(p, plan.objective), default=None),
                             points))
    return sorted(ranked, key=lambda r: -score(r.best, plan.objective) if r.best else float("inf"))


def measure(plan, choice: dict[str, str], load: float) -> Point:
    spec = load_workload(plan.spec, plan.over, load, None).spec  # p50/p99 of E2EL too, at this load
    quiet = dataclasses.replace(spec.output, progress=False, telemetry=False)
    spec = dataclasses.replace(spec, simulate=engine_for(spec, choice), output=quiet)
    check_spec(spec)  # as bench checks a parsed one (e.g. --simulate with --workers is refused)
    with contextlib.redirect_stdout(io.StringIO()):
        result = execute(spec).result
    return point_from_result(load, result)


def engine_for(spec, choice: dict[str, str]):
    """The simulated engine of one combination: the workload's own --sim-* values, then the knobs'."""
    return engine_from_flags(spec.sim_flags, simulated_flags(choice))


def score(p: Point | None, objective: str) -> float:
    if p is None:
        return 0.0
    return p.throughput if objective == "throughput" else (p.goodput or 0.0)


def text(plan, ranked: list[Ranked]) -> str:
    unit = "out tok/s" if plan.objective == "throughput" else "goodput req/s"
    slo = plan.slo or {}
    said = [f"SLO: {slo_text(slo, 'metric')}; a load counts only when it meets every limit, without errors", ""]
    lines = ["SIMULATED pre-ranking (servelab's vLLM V1 scheduler model; no engine ran)", "",
             *(said if slo else []),
             f"| rank | config | best {LOADS[plan.over][1]} | {unit} | p99 TTFT ms | p99 E2EL ms |"
             + (" SLO met |" if slo else ""),
             "|:--|:--|--:|--:|--:|--:|" + ("--:|" if slo else "")]
    for i, r in enumerate(ranked, 1):
        met = f" {sum(meets(p, slo) for p in r.points)} of {len(r.points)} loads |" if slo else ""
        if r.best is None:
            lines.append(f"| {i} | {r.name} | - | meets no load | - | - |{met}")
            continue
        p = r.best
        lines.append(f"| {i} | {r.name} | {p.load:g} | {score(p, plan.objective):,.1f} | "
                     f"{p.latency('p99_ttft'):,.0f} | {p.latency('p99_e2el'):,.0f} |{met}")
    lines += ["", "next: tune the leading configurations on the real engine (the same command without "
              "--simulate, fewer --knob values); these numbers are a model's, not a measurement"]
    return "\n".join(lines)


def save(plan, ranked: list[Ranked], shown: str) -> Path:
    """``presim.md`` (the table as printed) and ``presim.json`` (every point) in the tune's folder."""
    folder = Path(plan.folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / PRESIM_REPORT_FILE).write_text(shown + "\n", encoding="utf-8")
    data = {"simulated": True, "objective": plan.objective, "slo": plan.slo, "loads": list(plan.loads),
            "ranked": [{"config": r.name, "best": asdict(r.best) if r.best else None,
                        "points": [asdict(p) for p in r.points]} for r in ranked]}
    path = folder / PRESIM_FILE
    path.write_text(json.dumps(finite(data), indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return path

