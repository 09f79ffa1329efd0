"""Where a study's files live, and the marker that says a run is complete.

    <results>/<study>/study.toml                 the study file as it was run
    <results>/<study>/study.json                 what it resolved to (engines, workload flags, order)
    <results>/<study>/<engine>/engine.log        the engine's log (its latest start)
    <results>/<study>/<engine>/engine.json       facts about that start (version, dtype, model hash…)
    <results>/<study>/<engine>/<workload>/<repeat>/
        result.json  result.records.jsonl  [result.timeline.jsonl]
        console.txt  engine.log  memory.json  prompts.json (repeat 1)
        run.json     ← the marker

``run.json`` is written last, atomically (a temporary file renamed into place),
and only once the result and its records are complete: it alone says "done". A
run folder without it is an interrupted attempt; a rerun clears it and runs it
again. The marker carries a hash of the run's configuration, so a run made
under a different engine or workload definition is not mistaken for this one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from servelab.study.spec import RunKey, Study

RUN_MARKER = "run.json"  # reports/runs.py reads this name too
RESULT_FILE = "result.json"


def study_dir(study: Study) -> Path:
    return study.results / study.name


def engine_dir(study: Study, engine: str) -> Path:
    return study_dir(study) / engine


def run_dir(study: Study, key: RunKey) -> Path:
    return engine_dir(study, key.engine) / key.workload / str(key.repeat)


def config_hash(study: Study, key: RunKey) -> str:
    """What makes two runs comparable as the same config: engine definition + workload flags."""
    entry, workload = study.engines[key.engine], study.workloads[key.workload]
    spec = entry.spec
    engine = {"embedded": entry.embedded, "args": list(entry.args), "env": entry.env,
              "kind": spec.kind if spec else "vllm", "model": spec.model if spec else "embedded",
              "command": list(spec.command) if spec else [], "url": spec.url if spec else None}
    text = json.dumps({"engine": engine, "workload": list(workload.argv)}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def read_marker(folder: Path) -> dict | None:
    try:
        return json.loads((folder / RUN_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def is_done(study: Study, key: RunKey) -> bool:
    marker = read_marker(run_dir(study, key))
    return marker is not None and _same(study, key, marker)


def _same(study: Study, key: RunKey, marker: dict) -> bool:
    """Made under this definition, and on the engine start this repeat now belongs to
    (changing ``repeats`` or ``starts`` renumbers repeats across starts)."""
    return marker.get("config_hash") == config_hash(study, key) and marker.get("start", 1) == study.start_of(key)


def status(study: Study, key: RunKey) -> str:
    """"done", "stale" (done under another definition), "partial" (interrupted) or "todo"."""
    folder = run_dir(study, key)
    marker = read_marker(folder)
    if marker is not None:
        return "done" if _same(study, key, marker) else "stale"
    return "partial" if folder.exists() else "todo"


def clear(folder: Path) -> None:
    """Start a run from nothing: an interrupted attempt's files must not mix with the new ones."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)


def write_json_atomic(path: Path, data: dict) -> None:
    """Write to a temporary file beside ``path``, fsync, rename: readers see all or nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; results are shared like any other file
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def mark_done(study: Study, key: RunKey, info: dict) -> None:
    marker = {"study": study.name, "engine": key.engine, "workload": key.workload, "repeat": key.repeat,
              "repeats": study.total_repeats, "start": study.start_of(key), "config_hash": config_hash(study, key),
              "result": RESULT_FILE, **info}
    write_json_atomic(run_dir(study, key) / RUN_MARKER, marker)
