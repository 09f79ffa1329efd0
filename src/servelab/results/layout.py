"""The run folder: where a run's files live, and the marker that says it is complete.

    <root>/<study>/study.toml, study.json              the study as it was run, and what it resolved to
    <root>/<study>/report.html, report.md              ``servelab report`` (a scale folder's too)
    <root>/<study>/<engine>/engine.log, engine.json    the engine's latest start
    <root>/<study>/<engine>/<workload>/<repeat>/
        result.json  result.records.jsonl  [result.timeline.jsonl]
        console.txt  engine.log  memory.json  prompts.json (repeat 1)
        run.json     ← the marker, written last

A sweep's folder adds sweep.json; a tune's adds tune.json, tune.md and, beside a
config that failed to start, infeasible.json (``tune --simulate``: presim.json,
presim.md); a scale's adds scale.json; an optimize's adds optimize.json and its write-up,
optimize.md and optimize.html. The engine's own log keeps its name from
``engines.engine.ENGINE_LOG`` (the engine writes it wherever it is started; a run
folder holds the slice of its run).

``run.json`` is written last, atomically (a temporary file renamed into place), and
only once the result and its records are complete: it alone says "done". A run
folder without it is an interrupted attempt. This module writes and reads these
names for everyone (studies, sweeps and tuning write; compare, report and diagnose read).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

RUN_MARKER = "run.json"
RESULT_FILE = "result.json"
STUDY_FILE = "study.json"
ENGINE_FILE = "engine.json"
MEMORY_FILE = "memory.json"
PROMPTS_FILE = "prompts.json"
SCALE_FILE = "scale.json"  # a `servelab scale` folder's result (scale/run.py)
SWEEP_FILE = "sweep.json"  # a `servelab sweep` folder's summary (sweep/ladder.py)
TUNE_FILE = "tune.json"  # a `servelab tune` folder's ranking (sweep/tune.py)
TUNE_REPORT_FILE = "tune.md"  # the tune's section a report can include as is
INFEASIBLE_FILE = "infeasible.json"  # beside a tuned config whose engine failed to start
PRESIM_FILE, PRESIM_REPORT_FILE = "presim.json", "presim.md"  # `tune --simulate`'s ranking: every point, the table
CONSOLE_FILE = "console.txt"  # what a run printed, as the console showed it
STUDY_SOURCE_FILE = "study.toml"  # the study file as it was run
WARMUP_FILE = "warmup.txt"  # what the warm-up printed (kept apart from the run's console)
REPORT_HTML, REPORT_MD = "report.html", "report.md"  # `servelab report`'s page (and its Markdown)
OPTIMIZE_FILE = "optimize.json"  # a `servelab optimize` folder's record, rewritten after every step
OPTIMIZE_HTML, OPTIMIZE_MD = "optimize.html", "optimize.md"  # its write-up, from optimize.json alone (optimize/report.py)
# Files in a run folder that are not results.
NOT_RESULTS = frozenset({RUN_MARKER, MEMORY_FILE, ENGINE_FILE, STUDY_FILE, PROMPTS_FILE})


def study_dir(root: Path, study: str) -> Path:
    return Path(root) / study


def engine_dir(root: Path, study: str, engine: str) -> Path:
    return study_dir(root, study) / engine


def run_dir(root: Path, study: str, engine: str, workload: str, repeat: int) -> Path:
    return engine_dir(root, study, engine) / workload / str(repeat)


def read_marker(folder: Path) -> dict | None:
    """The run's marker, or None: not done (or unreadable, which counts the same)."""
    try:
        found = json.loads((Path(folder) / RUN_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def write_marker(folder: Path, marker: dict) -> None:
    write_json_atomic(Path(folder) / RUN_MARKER, {"result": RESULT_FILE, **marker})


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
