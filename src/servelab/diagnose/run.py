"""Find and read a saved run: its result JSON and the timeline beside it.

RUN is a result file, or a folder holding exactly one. A ``--append-result``
file holds one JSON object per line; the last run is the one read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from servelab.diagnose.decide import diagnose
from servelab.diagnose.evidence import evidence, facts_from_result
from servelab.diagnose.verdict import Diagnosis
from servelab.results.runs import find_result, read_result
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


def find_timeline(result_path: Path, result: dict) -> Path | None:
    """The file the result names (as written, or beside the result if moved), else the default name."""
    named = ((result.get("servelab") or {}).get("telemetry") or {}).get("timeline_file")
    candidates = [Path(named), result_path.parent / Path(named).name] if named else []
    candidates.append(tl.timeline_path(result_path, "", append=False))
    return next((p for p in candidates if p.is_file()), None)
