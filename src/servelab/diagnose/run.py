"""Find and read a saved run: its result JSON and the timeline beside it.

RUN is a result file, or a folder holding exactly one. A ``--append-result``
file holds one JSON object per line; the last run is the one read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from servelab.diagnose.decide import diagnose
from servelab.diagnose.evidence import evidence, facts_from_result
from servelab.diagnose.verdict import Diagnosis
from servelab.errors import InputError
from servelab.telemetry import timeline as tl


@dataclass(frozen=True, slots=True)
class SavedRun:
    result_path: Path
    result: dict
    timeline_path: Path | None
    timeline: tl.Timeline | None


def load_run(path: Path) -> SavedRun:
    result_path = find_result(Path(path))
    result = read_result(result_path)
    tpath = find_timeline(result_path, result)
    return SavedRun(result_path, result, tpath, tl.read(tpath) if tpath else None)


def diagnose_run(run: SavedRun, max_num_seqs: int | None = None,
                 max_num_batched_tokens: int | None = None) -> Diagnosis:
    facts = facts_from_result(run.result, max_num_seqs, max_num_batched_tokens)
    return diagnose(evidence(facts, run.timeline))


def find_result(path: Path) -> Path:
    if path.is_file():
        return path
    if not path.is_dir():
        raise InputError(f"{path}: no such result file or folder")
    found = [p for p in sorted(path.glob("*.json")) if _is_result(p)]
    if len(found) != 1:
        what = "no result JSON" if not found else f"{len(found)} results ({', '.join(p.name for p in found)})"
        raise InputError(f"{path}: {what}; name the result file")
    return found[0]


def _is_result(p: Path) -> bool:
    try:
        return "completed" in read_result(p)
    except InputError:
        return False


def read_result(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc}") from None
    for candidate in (text, text.strip().rsplit("\n", 1)[-1]):  # a whole file, or the last appended run
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    raise InputError(f"{path}: not a result JSON")


def find_timeline(result_path: Path, result: dict) -> Path | None:
    """The file the result names (as written, or beside the result if moved), else the default name."""
    named = ((result.get("servelab") or {}).get("telemetry") or {}).get("timeline_file")
    candidates = [Path(named), result_path.parent / Path(named).name] if named else []
    candidates.append(tl.timeline_path(result_path, "", append=False))
    return next((p for p in candidates if p.is_file()), None)
