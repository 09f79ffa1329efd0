"""Where the optimizer's runs happen: one seam, two ways.

``EngineMeasurer`` starts the engine of a configuration in a study ``Session`` (one start,
warm-up, then the runs; the engine stops on every way out, Ctrl-C included) and keeps it
while only the client's side changes. ``SimMeasurer`` runs the simulated engine's fast mode
in this process (``bench --simulate``): no server, no waiting, deterministic — the tests'
engine of known truth, and ``--simulate-first``'s pre-ranker. Both write every run as a
study run (``results/NAME/<engine config>/<client config>/<repeat>/``, marker last), so
``compare`` and ``diagnose`` read them, and both hand back the same ``Repeats``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from servelab.config import BenchSpec

from servelab.spec_checks import check_spec
from servelab.metrics.noise import Spread
from servelab.engines.kinds import kind_of
from servelab.errors import InputError
from servelab.optimize.config import REPORTED_FLAGS, Config, served_args
from servelab.results import layout as files
from servelab.results.runs import Run, run_result
from servelab.sim.options import engine_from_flags
from servelab.telemetry.timeline import read as read_timeline
from servelab.study import layout
from servelab.study.engine_runs import EngineRuns
from servelab.study.entries import EngineEntry, Workload
from servelab.study.session import Session, in_experiment, run_into
from servelab.sweep.ladder import workload_spec

# What a step's result reports, by the result's key.
SHOWN = {"output_tok_s": "output_throughput", "mean_ttft_ms": "mean_ttft_ms", "mean_tpot_ms": "mean_tpot_ms"}


@dataclass(frozen=True, slots=True)
class Repeats:
    """One configuration's repeats: each one's result and folder, and what measuring them spent."""

    results: tuple[dict, ...]  # one result JSON per repeat
    runs: tuple[str, ...]  # their folders, relative to results/NAME
    engine_started: bool  # an engine start was spent on it
    fresh_flags: tuple[bool, ...] = ()  # per run: measured now (False: read back, done before)
    reported: dict[str, str] = dataclasses.field(default_factory=dict)  # knob flag -> the engine's own value

    @property
    def fresh(self) -> int:
        """Runs measured now: what the budget counts."""
        return sum(self.fresh_flags)

    def spread(self, key: str) -> Spread:
        return Spread(tuple(float(r.get(key) or 0.0) for r in self.results))

    def summary(self) -> dict:
        out = {name: round(self.spread(key).mean, 3) for name, key in SHOWN.items()}
        return {**out, "repeats": len(self.results), "runs": list(self.runs)}

    @property
    def diagnosis(self) -> dict:
        """The first repeat's (every repeat ran the same load on the same config)."""
        return (self.results[0].get("servelab") or {}).get("diagnosis") or {}


def engine_reported(folder: Path, result: dict | None) -> dict[str, str]:
    """The knobs' values the engine itself reported in its metrics (``REPORTED_FLAGS``: vLLM's
    ``cache_config_info`` labels, in the run's telemetry header), by flag; {} without them."""
    path = Run(result or {}, folder / files.RESULT_FILE, "").timeline_path()
    if path is None:
        return {}
    try:
        cache = (read_timeline(path).header.get("engine") or {}).get("cache_config") or {}
    except InputError:  # a torn telemetry file: nothing reported, the next source is read
        return {}
    return {flag: str(cache[label]) for flag, label in REPORTED_FLAGS.items() if cache.get(label) is not None}


class Measurer(Protocol):
    simulated: bool
    engine_starts: int

    def measure(self, config: Config, repeats: int) -> Repeats: ...

    def close(self) -> None: ...


def config_tag(config: Config) -> str:
    """The engine folder's name, derived from the engine's flags and environment (the client's
    settings are the workload's name): the same engine config finds its runs again."""
    text = json.dumps([list(config.engine_args), sorted(config.env.items())]
                      + ([config.model] if config.model is not None else []))  # the base's tags unchanged
    return "engine-" + hashlib.sha256(text.encode()).hexdigest()[:8]


def client_workload(spec: BenchSpec, config: Config, slo: dict | None, base_model: str = "") -> Workload:
    """The fixed workload with the configuration's client: ``c8`` (cap 8), ``c8-w2`` (2 workers).
    Another checkpoint served (a model change) keeps the workload's tokenizer — the base model's
    when none was given — so its requests are the same ones, token for token."""
    if config.model is not None and not spec.tokenizer and not spec.skip_tokenizer_init and base_model:
        spec = dataclasses.replace(spec, tokenizer=base_model)
    base = workload_spec(spec, slo)
    load = dataclasses.replace(base.load, max_concurrency=config.max_concurrency, workers=config.workers or 1)
    varied = dataclasses.replace(base, load=load)
    check_spec(varied)
    name = f"c{config.max_concurrency}" if config.max_concurrency else "cinf"
    return Workload(name + (f"-w{config.workers}" if (config.workers or 1) > 1 else ""), varied)


def engine_runs(name: str, results: Path, base: EngineEntry, config: Config, warmup: int, port: int) -> EngineRuns:
    spec, own = base.spec, ()
    if config.model is not None and spec.kind == "embedded":  # resolved now, or it would set its own model
        resolved = kind_of(spec).resolve(spec)
        spec, own = resolved, resolved.args[:len(resolved.args) - len(spec.args)]  # its defaults, first
    if config.model is not None and spec.kind != "sim":  # the sim takes its "model" as a flag (served_args)
        spec = dataclasses.replace(spec, model=config.model)
    spec = dataclasses.replace(spec, name=config_tag(config), args=(*own, *served_args(config, spec.kind)),
                               env={**config.env})
    entry = dataclasses.replace(base, name=spec.name, spec=spec, args=spec.args, env=spec.env)
    return EngineRuns(name=name, results=results, engine=entry, warmup=warmup, port=port,
                      origin=results / name / "optimize.json")


class EngineMeasurer:
    """A real engine, one ``Session`` per engine configuration, kept open across client changes."""

    def __init__(self, name: str, results: Path, base: EngineEntry, spec: BenchSpec, slo: dict | None,
                 say, warmup: int = 4, port: int = 8000, verbose: bool = False) -> None:
        self.name, self.results, self.base, self.spec, self.slo = name, results, base, spec, slo
        # the simulated engine served in real time runs no weights: its answers judge no change
        self.simulated = base.spec.kind == "sim"
        self.say, self.warmup, self.port, self.verbose = say, warmup, port, verbose
        self.session: Session | None = None
        self.tag: str | None = None
        self.engine_starts = 0

    def measure(self, config: Config, repeats: int) -> Repeats:
        session = self._session(config)
        workload = client_workload(self.spec, config, self.slo, self._base_model() if config.model else "")
        was_up = session.engine is not None
        out = [session.run(workload, r) for r in range(1, repeats + 1)]
        started = session.engine is not None and not was_up
        self.engine_starts += started
        root = self.results / self.name
        return Repeats(tuple(r.result or {} for r in out), tuple(str(r.folder.relative_to(root)) for r in out),
                       started, tuple(not r.kept for r in out), engine_reported(out[0].folder, out[0].result))

    def _base_model(self) -> str:
        """The base model as launched (the embedded engine's converted folder): the workload's
        tokenizer when none was given. The sim serves one name whatever its step costs: none."""
        spec = self.base.spec
        return "" if spec.kind == "sim" else kind_of(spec).resolve(spec).model

    def _session(self, config: Config) -> Session:
        tag = config_tag(config)
        if self.session is None or tag != self.tag:
            self.close()
            runs = engine_runs(self.name, self.results, self.base, config, self.warmup, self.port)
            self.session, self.tag = Session(runs, self.say, self.verbose), tag
        return self.session

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None


class SimMeasurer:
    """The simulated engine's fast mode: the engine's args are the sim engine's (vLLM-named) flags."""

    simulated = True

    def __init__(self, name: str, results: Path, base: EngineEntry, spec: BenchSpec, slo: dict | None) -> None:
        self.name, self.results, self.base, self.spec, self.slo = name, results, base, spec, slo
        self.engine_starts = 0

    def measure(self, config: Config, repeats: int) -> Repeats:
        runs = engine_runs(self.name, self.results, self.base, config, 0, 0)
        workload = client_workload(self.spec, config, self.slo)
        results, folders, fresh = [], [], []
        for repeat in range(1, repeats + 1):
            folder = layout.run_dir(runs, workload, repeat)
            fresh.append(not layout.is_done(runs, workload, repeat))
            if fresh[-1]:
                self._run(runs, workload, repeat, config)
            results.append(run_result(folder) or {})
            folders.append(str(folder.relative_to(self.results / self.name)))
        first = self.results / self.name / folders[0]
        return Repeats(tuple(results), tuple(folders), False, tuple(fresh), engine_reported(first, results[0]))

    def _run(self, runs: EngineRuns, workload: Workload, repeat: int, config: Config) -> None:
        folder = layout.run_dir(runs, workload, repeat)
        layout.clear(folder)
        engine = engine_from_flags(self.spec.sim_flags, served_args(config, "sim"))
        spec = dataclasses.replace(workload.spec.into(folder, files.RESULT_FILE, runs.engine.name, progress=False,
                                                      telemetry=True), simulate=engine)
        spec = in_experiment(spec, runs)
        started = time.monotonic()
        with contextlib.redirect_stderr(io.StringIO()):  # its stderr is neither kept nor shown
            run_into(folder, spec)
        layout.mark_done(runs, workload, repeat, {"wall_s": round(time.monotonic() - started, 2),
                                                  "simulated": "fast"})

    def close(self) -> None:
        pass

