"""A study's runs on disk: which folder each run has, whether it is done, and its identity.

The folder layout and the marker belong to ``results/layout.py``; this module maps a
study's names onto it and decides "done": a marker made under this run's definition,
and on the engine start this repeat belongs to.

The definition is a hash of the values themselves — the engine entry and the
workload's ``BenchSpec``, walked field by field — not of the flags that once built
them: a sweep or tune that varies a spec with ``dataclasses.replace`` changes the
hash by changing the value, with nothing to keep in step by hand. Only the fields in
``NOT_IDENTITY`` (where results go, how progress is shown) are left out. Markers
written before hashed the workload's flags (``legacy_hash``); they still count, so an
old study folder resumes with its finished runs kept.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

from servelab.config import BenchSpec
from servelab.results import layout as files
from servelab.results.layout import RESULT_FILE, RUN_MARKER, clear, read_marker, write_json_atomic
from servelab.study.engine_runs import EngineRuns, study_engine_runs
from servelab.study.entries import EngineEntry, Workload
from servelab.study.file import RunKey, Study

__all__ = ["NOT_IDENTITY", "RESULT_FILE", "RUN_MARKER", "canonical", "clear", "is_done", "legacy_hash",
           "mark_done", "read_marker", "run_dir", "run_hash", "same_definition", "status", "study_dir", "study_run",
           "write_json_atomic"]

# Fields that do not change what is sent or measured, by their path in
# {"engine": EngineEntry, "workload": BenchSpec}. Every other field is the run's identity.
NOT_IDENTITY = frozenset({
    "engine.name",  # the folder's name (a tuned config is named after its knobs, which are in its args)
    "engine.description",  # a note for the reader
    "engine.port",  # where the study places the engine
    "engine.ready_timeout_s",  # how long to wait for the engine to start
    "engine.spec.name",  # as engine.name
    "engine.spec.host",  # where an engine servelab starts listens (an external server's url stays in)
    "engine.spec.port",  # as engine.spec.host
    "engine.spec.ready_timeout_s",  # as engine.ready_timeout_s
    "engine.spec.ready_url",  # how a command engine's readiness is asked (it names the port)
    "workload.argv",  # provenance: the flags as given, shown, never parsed again
    "workload.server.base_url",  # each run points it at its engine (an external one's url: engine.spec.url)
    "workload.output.label",  # each run labels its result with its engine's name
    "workload.output.save_result",  # each run saves its result into its own folder
    "workload.output.append_result",  # as save_result
    "workload.output.result_dir",  # the run's folder
    "workload.output.result_filename",  # result.json in it
    "workload.output.progress",  # the progress line
    "workload.output.telemetry_interval_s",  # how often telemetry samples, not what the run sends
    "workload.output.gpu_hour_cost",  # a price: what the measured GPU-hours cost, not what is measured
    "engine.gpu_hour_cost",  # as workload.output.gpu_hour_cost
    "workload.output.llmd_report",  # another file written from the same result (issue 37)
    "workload.output.llmd_experiment",  # as llmd_report: the report's experiment id
})


# Fields added to the spec after markers hashed it, left out of the identity while empty (their
# default), so a folder written before keeps its finished runs; by name, at any depth.
WHEN_SET = frozenset({
    "sim_flags",  # BenchSpec: the --sim-* values given (issue 33); before, argv alone carried them
    "quality",  # BenchSpec: the --quality-* judgement (issue 35)
    "trace_scale", "trace_max_wait_s", "agentic_shape",  # DatasetSpec: agentic sessions (issue 36)
    "agentic_locked", "agentic_min_duration_s",  # DatasetSpec: the AgentX-style locked scenario (issue 36)
    "traceparent",  # RequestSpec: a W3C traceparent header on each request (issue 37)
    "structured_share", "structured_kind",  # RequestSpec: structured-output constraints (issue 36)
    "structured_field",  # RequestSpec: the request field carrying them (structured_outputs | response_format)
    "tool_choice",  # RequestSpec: agentic chat sessions' tools (issue 36)
    "max_sessions",  # LoadSpec: agentic sessions under way at most (lanes)
})


def _at_default(value, f: dataclasses.Field) -> bool:
    """A ``WHEN_SET`` field left as it was before the field existed: empty, or its default."""
    got = getattr(value, f.name)
    return not got or (f.default is not dataclasses.MISSING and got == f.default)


def canonical(value, skip: frozenset[str] = frozenset(), at: str = ""):
    """``value`` as plain JSON: dataclasses as {field: …} (``skip``: dotted paths left out;
    a ``WHEN_SET`` field while empty or at its default), tuples as lists, floats as their repr ("inf", "0.1":
    JSON has no inf, and one float has one spelling). Anything else is a TypeError, never a
    silent ``repr`` of an object."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        named = ((f.name, f"{at}{f.name}") for f in dataclasses.fields(value)
                 if not (f.name in WHEN_SET and _at_default(value, f)))
        return {name: canonical(getattr(value, name), skip, path + ".") for name, path in named if path not in skip}
    if isinstance(value, dict):
        return {str(k): canonical(v, skip, f"{at}{k}.") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(v, skip, at) for v in value]
    if isinstance(value, float):
        return repr(value)
    if value is None or isinstance(value, (bool, int, str)):
        return value
    raise TypeError(f"{at.rstrip('.') or 'value'}: {type(value).__name__} has no canonical form")


def run_hash(engine: EngineEntry, spec: BenchSpec) -> str:
    """The identity of a run: what it sends and measures, on which engine."""
    text = json.dumps(canonical({"engine": engine, "workload": spec}, NOT_IDENTITY), sort_keys=True,
                      separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def legacy_hash(entry: EngineEntry, argv: tuple[str, ...]) -> str:
    """The identity markers had before ``run_hash``: the engine's definition and the workload's
    flags. Only read, to recognise those markers; never written."""
    spec, embedded = entry.spec, entry.embedded
    # the embedded engine hashed as "vllm", model "embedded"
    engine = {"embedded": embedded, "args": list(entry.args), "env": entry.env,
              "kind": "vllm" if embedded else spec.kind, "model": "embedded" if embedded else spec.model,
              "command": list(spec.command), "url": spec.url}
    text = json.dumps({"engine": engine, "workload": list(argv)}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def study_dir(study: Study) -> Path:
    return files.study_dir(study.results, study.name)


def study_run(study: Study, key: RunKey, port: int | None = None) -> tuple[EngineRuns, Workload, int]:
    """A study's run by its names: (its engine's runs, its workload, its repeat), as the functions
    below take them — ``status(*study_run(study, key))``."""
    return study_engine_runs(study, key.engine, port), study.workloads[key.workload], key.repeat


def run_dir(runs: EngineRuns, workload: Workload, repeat: int) -> Path:
    return files.run_dir(runs.results, runs.name, runs.engine.name, workload.name, repeat)


def is_done(runs: EngineRuns, workload: Workload, repeat: int) -> bool:
    return status(runs, workload, repeat) == "done"


def recovered(folder: Path) -> bool:
    """The folder's result was recovered from a killed run (results/recover.py): kept and
    flagged, never a finished repeat — a resumed study reruns it."""
    try:
        result = json.loads((folder / files.RESULT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(result, dict) and bool((result.get("servelab") or {}).get("recovered"))


def same_definition(runs: EngineRuns, workload: Workload, stored: str | None) -> bool:
    """A stored hash names this run's definition: today's, or the one old markers were given."""
    return stored in (run_hash(runs.engine, workload.spec), legacy_hash(runs.engine, workload.argv))


def _same(runs: EngineRuns, workload: Workload, repeat: int, marker: dict) -> bool:
    """Made under this definition, and on the engine start this repeat now belongs to
    (changing ``repeats`` or ``starts`` renumbers repeats across starts)."""
    return same_definition(runs, workload, marker.get("config_hash")) and \
        marker.get("start", 1) == runs.start_of(repeat)


def status(runs: EngineRuns, workload: Workload, repeat: int) -> str:
    """"done", "stale" (done under another definition), "partial" (interrupted) or "todo"."""
    folder = run_dir(runs, workload, repeat)
    marker = read_marker(folder)
    if marker is not None and not recovered(folder):
        return "done" if _same(runs, workload, repeat, marker) else "stale"
    return "partial" if folder.exists() else "todo"


def mark_done(runs: EngineRuns, workload: Workload, repeat: int, info: dict) -> None:
    marker = {"study": runs.name, "engine": runs.engine.name, "workload": workload.name, "repeat": repeat,
              "repeats": runs.total_repeats, "start": runs.start_of(repeat),
              "config_hash": run_hash(runs.engine, workload.spec), **info}
    files.write_marker(run_dir(runs, workload, repeat), marker)
