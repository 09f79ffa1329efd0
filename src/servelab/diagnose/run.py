"""Find and read a saved run: its result JSON and the timeline beside it.

RUN is a result file, or a folder holding exactly one. A ``--append-result``
file holds one JSON object per line; the last run is the one read. A JSON that
is not a bench result (a step model, a plan, a study summary) is refused in
one line naming what it lacks: a verdict on it would be about nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from servelab.diagnose.decide import diagnose
from servelab.diagnose.evidence import evidence, facts_from_result
from servelab.diagnose.verdict import Diagnosis
from servelab.errors import InputError
from servelab.results.runs import find_result, read_result
from servelab.telemetry import timeline as tl

# Keys every bench result has (``vllm bench serve``'s and ``servelab bench``'s alike): without
# them there is no run to diagnose.
RESULT_KEYS = ("completed", "duration")


@dataclass(frozen=True, slots=True)
class SavedRun:
    result_path: Path
    result: dict
    timeline_path: Path | None
    timeline: tl.Timeline | None


def load_run(path: Path) -> SavedRun:
    result_path = find_result(Path(path))
    result = read_result(result_path)
    missing = [k for k in RESULT_KEYS if k not in result]
    if missing:
        raise InputError(f"{result_path}: not a bench result (no {' or '.join(repr(k) for k in missing)}); "
                         "diagnose reads what `servelab bench --save-result` writes")
    tpath = find_timeline(result_path, result)
    return SavedRun(result_path, result, tpath, tl.read(tpath) if tpath else None)


def diagnose_run(run: SavedRun, max_num_seqs: int | None = None,
                 max_num_batched_tokens: int | None = None) -> Diagnosis:
    facts = facts_from_result(run.result, max_num_seqs, max_num_batched_tokens)
    return diagnose(evidence(facts, run.timeline))


def find_timeline(result_path: Path, result: dict) -> Path | None:
    """The file the result names (as written, or beside the result if moved), else the default name."""
    named = ((result.get("servelab") or {}).get("telemetry") or {}).get("timeline_file")
    candidates = [Path(named), result_path.parent / Path(named).name] if named else []
    candidates.append(tl.timeline_path(result_path, "", append=False))
    return next((p for p in candidates if p.is_file()), None)
