"""An engine session: one engine of a study, started once (and warmed up), then runs
one at a time — a study's runs in order, a sweep's next load, a bisection's midpoint.

Each run is a study run: same folder layout, same ``run.json`` marker (written last,
only when the run completed), the engine's prefix cache emptied before it where the
engine allows it (vLLM: ``POST /reset_prefix_cache``, served when
``VLLM_SERVER_DEV_MODE=1``, which the session sets), so a repeat is not served from
the cache its predecessor filled. A run done before is read back, not measured
again, and the engine starts only when a run is not done yet: a fully resumed
session starts nothing.

    with Session(study_engine_runs(study, "embedded"), say=print) as session:
        run = session.run(Workload("c8", spec))   # kept from before, or measured now

SIGINT/SIGTERM during a run end that run (``execute`` handles them); the session then
raises KeyboardInterrupt and the engine stops on the way out.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from servelab.engines import EngineSpec, start_engine
from servelab.engines.engine import ENGINE_LOG
from servelab.engines.kinds import kind_of
from servelab.engines.serve_line import DEV_MODE
from servelab.engines.vllm import reset_prefix_cache
from servelab.errors import EngineError
from servelab.config import BenchSpec, ServerSpec
from servelab.results.runs import run_result
from servelab.results import layout as files
from servelab.planner.predict import prediction_facts, prediction_line
from servelab.study import gpu_memory, layout
from servelab.measure.run import BenchOutcome, bench_tokenizer, execute
from servelab.measure.facts import engine_context, engine_facts, footprint_gib, hardware
from servelab.study.engine_runs import EngineRuns
from servelab.study.entries import EngineEntry, Workload
from servelab.study.file import RunKey

PROMPT_SAMPLES = 3  # prompts kept per workload for the report


@dataclass(frozen=True, slots=True)
class SessionRun:
    key: RunKey
    folder: Path
    result: dict | None  # the result JSON; None when the run wrote none
    done: bool  # its marker is written (complete)
    kept: bool  # done before this session: not run again


class Session:
    """One engine's runs (``EngineRuns``): it starts on the first run not done, then each
    ``run(workload, repeat)`` is read back or measured."""

    def __init__(self, runs: EngineRuns, say: Callable[[str], None] = print, verbose: bool = False,
                 starting: str | None = None) -> None:
        self.runs, self.name, self.verbose = runs, runs.engine.name, verbose
        self.say = say  # the caller's prefix names the study, sweep or tune
        self.starting = starting or f"engine {self.name}: starting"  # the line said when it starts
        self.engine = None
        self.facts: dict = {}
        self.gpu_before: list[float | None] | None = None  # used GiB per GPU before the engine started

    def __enter__(self) -> Session:
        return self

    def __exit__(self, exc_type, *_) -> None:
        self.close(check_gpu=exc_type is None)  # leaving on Ctrl-C or an error: stop, don't wait

    def close(self, check_gpu: bool = True) -> None:
        if self.engine is not None:
            ours = self.engine.pid is not None  # an external server is not ours to stop or to watch
            self.engine.stop()
            self.engine = None
            for line in gpu_memory.not_returned(self.gpu_before) if check_gpu and ours else ():
                self.say(f"engine {self.name}: {line}")

    def is_done(self, workload: Workload, repeat: int = 1) -> bool:
        return layout.is_done(self.runs, workload, repeat)

    def run(self, workload: Workload, repeat: int = 1) -> SessionRun:
        """The run's result: read back when done before, else measured now."""
        key = RunKey(self.name, workload.name, repeat)
        folder = layout.run_dir(self.runs, workload, repeat)
        if layout.is_done(self.runs, workload, repeat):
            return SessionRun(key, folder, run_result(folder), True, True)
        engine = self.started(workload)
        done = _run_one(self.runs, workload, repeat, engine, self.facts, self.verbose, self.say)
        if not done:
            _check_alive(engine)  # no completed request: a dead engine ends the session
        return SessionRun(key, folder, run_result(folder), done, False)

    def started(self, first: Workload):
        """The engine, started (and warmed up with ``first``) if it is not yet."""
        if self.engine is None:
            self.engine = self._start(first)
        return self.engine

    def _start(self, first: Workload):
        spec = resolve_spec(self.runs.engine, self.runs.port)
        folder = self.runs.folder
        self.say(self.starting)
        self.gpu_before = gpu_memory.used_gib() if spec.kind != "external" else None
        engine = start_engine(spec, folder)
        try:
            ready = f"ready in {engine.ready_s:.0f} s · " if engine.ready_s is not None else ""
            self.say(f"engine {self.name}: {ready}{engine.memory_report.line()}")
            self.facts = {**engine_context(engine), **engine_facts(engine),
                          "log_ready_bytes": _size(engine.log_path), "plan": prediction_facts(engine)}
            if self.facts["plan"]:
                self.say(f"engine {self.name}: {prediction_line(self.facts['plan'])}")
            _warm_up(self.runs, engine, first, folder, self.say)
            self.facts["footprint_gib"] = footprint_gib(engine)
            layout.write_json_atomic(folder / files.ENGINE_FILE, self.facts)
        except BaseException:
            engine.stop()
            raise
        return engine


def _check_alive(engine) -> None:
    """A run with no completed request may mean the engine died: then the rest cannot run."""
    if not engine.alive():
        lines = "\n".join(f"  | {line}" for line in engine.last_log_lines(20))
        raise EngineError(f"engine {engine.spec.name!r} died during the study (completed runs are kept); "
                          f"last log lines:\n{lines}")


def resolve_spec(entry: EngineEntry, port: int) -> EngineSpec:
    """The spec to launch, resolved (the embedded kind converts its model first and becomes
    the vLLM spec it runs); vLLM gets dev mode so the study can empty its prefix cache between runs."""
    spec = dataclasses.replace(entry.spec, port=port) if entry.port is None else entry.spec
    spec = kind_of(spec).resolve(spec)
    if spec.kind == "vllm" and entry.reset_prefix_cache and DEV_MODE not in spec.env:
        spec = dataclasses.replace(spec, env={**spec.env, DEV_MODE: "1"})
    return spec


def _warm_up(runs: EngineRuns, engine, first: Workload, folder: Path, say) -> None:
    """A few requests shaped like the first workload, with another seed (other prompts),
    so the first measured run does not pay for the engine's first requests."""
    if runs.warmup == 0:
        return
    spec = first.spec
    dataset = dataclasses.replace(spec.dataset, num_prompts=_warmup_prompts(spec, runs.warmup),
                                  seed=runs.seed + 7919)
    output = dataclasses.replace(spec.output, progress=False, telemetry=False)
    # Warming the engine needs no spread client: one process, whatever --workers/--ray say
    # (a few requests cannot be shared between many workers).
    load = dataclasses.replace(spec.load, workers=1, ray=None)
    with _captured(folder / files.WARMUP_FILE, echo=False):
        warm = execute(dataclasses.replace(spec, server=_where(spec, engine), dataset=dataset, output=output,
                                           load=load))
    say(f"engine {runs.engine.name}: warmed up with {warm.summary.completed} requests "
             f"({warm.summary.failed} failed)")


def _warmup_prompts(spec: BenchSpec, n: int) -> int:
    # prefix_repetition makes num_prompts // num_prefixes per prefix: at least one each
    d = spec.dataset
    return max(n, d.prefix_repetition_num_prefixes) if d.name == "prefix_repetition" else n


def in_experiment(spec: BenchSpec, runs: EngineRuns) -> BenchSpec:
    """One experiment id a study (or sweep, or optimize): its load points' llm-d reports share it."""
    if not spec.output.llmd_report:
        return spec
    return dataclasses.replace(spec, output=dataclasses.replace(spec.output, llmd_experiment=runs.name))


def _where(spec: BenchSpec, engine) -> ServerSpec:
    return dataclasses.replace(spec.server, base_url=engine.base_url, model=engine.model)


def _run_one(runs: EngineRuns, workload: Workload, repeat: int, engine, facts: dict, verbose: bool, say) -> bool:
    """One measured run; True when it completed and its marker is written."""
    folder = layout.run_dir(runs, workload, repeat)
    layout.clear(folder)
    reset = reset_prefix_cache(engine.base_url) if runs.engine.reset_prefix_cache else "off"
    spec = _priced(_run_spec(workload.spec, runs.engine.name, engine, folder), runs)
    spec = in_experiment(spec, runs)
    if repeat == 1:
        _save_prompts(spec, folder / files.PROMPTS_FILE)
    context = {"engine": facts, "study": _study_context(runs, workload, repeat, reset)}
    started, log_from = time.monotonic(), _size(engine.log_path)
    outcome = run_into(folder, spec, context, echo=verbose)
    _after_run(engine, folder, facts, log_from)
    if outcome.run.outcome.interrupted:
        raise KeyboardInterrupt  # the run was cut: no marker; the engine stops on the way out
    say("  " + run_line(outcome, time.monotonic() - started, folder))
    if not engine.alive():  # it died during the run: what was measured is kept, but not as a done run
        say(f"  the engine died during this run ({outcome.summary.completed} requests had completed); "
                 "the run is not marked done")
        return False
    if outcome.exit_code != 0:
        return False
    layout.mark_done(runs, workload, repeat, {"wall_s": round(time.monotonic() - started, 2), "prefix_cache": reset,
                                  "finished": time.strftime("%Y-%m-%dT%H:%M:%S")})
    return True


def run_into(folder: Path, spec: BenchSpec, context: dict | None = None, echo: bool = False) -> BenchOutcome:
    """One run measured in its run folder (made and emptied by the caller; ``spec`` written into it,
    ``BenchSpec.into``): what it prints kept as the folder's console.txt, and shown too when ``echo``.
    A study's, sweep's or tune's run (``Session``), and optimize's simulated one, which has no engine."""
    with _captured(folder / files.CONSOLE_FILE, echo=echo):
        return execute(spec, context=context)


def _run_spec(spec: BenchSpec, label: str, engine, folder: Path) -> BenchSpec:
    """The workload's spec, plus where the engine is and where the result goes."""
    return dataclasses.replace(spec.into(folder, files.RESULT_FILE, label), server=_where(spec, engine))


def _priced(spec: BenchSpec, runs: EngineRuns) -> BenchSpec:
    """The engine's $ per GPU-hour (study file) over the workload's --gpu-hour-cost, when it has one."""
    price = runs.engine.gpu_hour_cost
    return spec if price is None else dataclasses.replace(spec, output=dataclasses.replace(spec.output,
                                                                                           gpu_hour_cost=price))


def _study_context(runs: EngineRuns, workload: Workload, repeat: int, reset: str) -> dict:
    return {"name": runs.name, "file": str(runs.origin), "sha256": runs.origin_sha256, "engine": runs.engine.name,
            "workload": workload.name, "repeat": repeat, "repeats": runs.total_repeats,
            "start": runs.start_of(repeat), "starts": runs.starts,
            "config_hash": layout.run_hash(runs.engine, workload.spec), "prefix_cache": reset, "hardware": hardware()}


def _after_run(engine, folder: Path, facts: dict, log_from: int) -> None:
    """Beside the result: the engine's log (its start, then this run) and its memory report."""
    if engine.log_path.is_file():
        write_log_slice(engine.log_path, folder / ENGINE_LOG, facts.get("log_ready_bytes", 0), log_from)
    memory = {**engine.memory_report.to_dict(), "footprint_gib": facts.get("footprint_gib"),
              "checkpoint_gib": (facts.get("model_files") or {}).get("weights_gib"), "plan": facts.get("plan")}
    (folder / files.MEMORY_FILE).write_text(json.dumps(memory, indent=1), encoding="utf-8")


def write_log_slice(source: Path, target: Path, head_end: int, run_from: int) -> None:
    """The log up to ready (what started, its memory lines), then only what this run added:
    earlier runs' request lines would repeat in every run's copy."""
    with open(source, "rb") as log, open(target, "wb") as out:
        out.write(log.read(head_end))
        if run_from > head_end:
            out.write(f"\n# servelab: {run_from - head_end} bytes of earlier runs left out\n".encode())
        log.seek(max(head_end, run_from))
        shutil.copyfileobj(log, out)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def run_line(outcome: BenchOutcome, wall_s: float, folder: Path) -> str:
    s = outcome.summary
    ttft = s.stats_ms["ttft"].mean if "ttft" in s.stats_ms else float("nan")
    return (f"{s.completed} ok, {s.failed} failed · {s.output_throughput:.1f} output tok/s · "
            f"mean TTFT {ttft:.0f} ms · {wall_s:.0f} s → {folder}")


MADE_AT_SEND = "(token ids made as the call is sent: an agentic session's blocks, datasets/agentic.py)"


def _save_prompts(spec: BenchSpec, path: Path) -> None:
    """The first prompts of this workload, for the report. Drawn again with the run's
    own seed, dataset and tokenizer — the same sample the run sends."""
    from servelab.measure.drivers import DRIVERS

    kind = DRIVERS[spec.driver]
    with contextlib.redirect_stderr(io.StringIO()):  # its notes repeat in the run's own output
        tokenizer = bench_tokenizer(spec, spec.server.model)
        samples = kind.requests(kind.prepare(spec, tokenizer))  # the run's own (its requests from the cache)
    rows = [{"prompt": s.prompt if s.prompt != () else MADE_AT_SEND, "prompt_len": s.prompt_len,
             "output_len": s.expected_output_len} for s in samples[:PROMPT_SAMPLES]]
    path.write_text(json.dumps(rows, indent=1), encoding="utf-8")


@contextlib.contextmanager
def _captured(path: Path, echo: bool):
    """stdout to ``path`` (the run's console block), and to the terminal too when ``echo``."""
    with open(path, "w", encoding="utf-8") as f:
        target = _Tee(f, sys.stdout) if echo else f
        with contextlib.redirect_stdout(target):
            yield


class _Tee(io.TextIOBase):
    def __init__(self, *streams) -> None:
        self.streams = streams

    def write(self, text: str) -> int:
        for s in self.streams:
            s.write(text)
        return len(text)

    def flush(self) -> None:
        for s in self.streams:
            s.flush()
