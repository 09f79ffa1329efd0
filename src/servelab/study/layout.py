"""A study's runs on disk: which folder each run has, and whether it is done.

The folder layout and the marker belong to ``results/layout.py``; this module maps a
study's names onto it and decides "done": a marker made under this run's definition
(a hash of the engine and workload), and on the engine start this repeat belongs to.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from servelab.results import layout as files
from servelab.results.layout import RESULT_FILE, RUN_MARKER, clear, read_marker, write_json_atomic
from servelab.study.file import RunKey, Study

__all__ = ["RESULT_FILE", "RUN_MARKER", "clear", "config_hash", "engine_dir", "is_done", "mark_done", "read_marker",
           "run_dir", "status", "study_dir", "write_json_atomic"]


def study_dir(study: Study) -> Path:
    return files.study_dir(study.results, study.name)


def engine_dir(study: Study, engine: str) -> Path:
    return files.engine_dir(study.results, study.name, engine)


def run_dir(study: Study, key: RunKey) -> Path:
    return files.run_dir(study.results, study.name, key.engine, key.workload, key.repeat)


def config_hash(study: Study, key: RunKey) -> str:
    """What makes two runs comparable as the same config: engine definition + workload flags."""
    entry, workload = study.engines[key.engine], study.workloads[key.workload]
    spec, embedded = entry.spec, entry.embedded
    # the embedded engine hashes as it always has ("vllm", model "embedded"): its runs stay done
    engine = {"embedded": embedded, "args": list(entry.args), "env": entry.env,
              "kind": "vllm" if embedded else spec.kind, "model": "embedded" if embedded else spec.model,
              "command": list(spec.command), "url": spec.url}
    text = json.dumps({"engine": engine, "workload": list(workload.argv)}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


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


def mark_done(study: Study, key: RunKey, info: dict) -> None:
    marker = {"study": study.name, "engine": key.engine, "workload": key.workload, "repeat": key.repeat,
              "repeats": study.total_repeats, "start": study.start_of(key), "config_hash": config_hash(study, key),
              **info}
    files.write_marker(run_dir(study, key), marker)
