"""Find and read runs: result JSON files, folders of them, or a whole study.

How each argument becomes runs, and which config (column) each run belongs to:

* a study folder (or any folder with ``run.json`` markers below it): every
  complete run; config = its engine, workload = its workload, repeat = its repeat.
  Folders without a marker are interrupted attempts and are left out.
* another folder: every result JSON in it is a repeat of one config named after
  the folder.
* a result file: one config named by the file's ``--label``, else its stem; a
  file written with ``--append-result`` holds one run per line (repeats).
* another tool's file (GuideLLM, AIPerf, inference-perf, SGLang, vLLM, the llm-d report;
  ``results/foreign``), recognised by what is in it, read into the same shape; in a folder,
  files that are none of these are passed over.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from servelab.errors import InputError
from servelab.results import foreign
from servelab.results.layout import MEMORY_FILE, NOT_RESULTS, PROMPTS_FILE, RESULT_FILE, RUN_MARKER, STUDY_FILE


@dataclass(slots=True)
class Run:
    result: dict
    path: Path  # the result file
    config: str
    workload: str = ""  # "" outside a study: one table for everything
    repeat: int | None = None
    study: str | None = None

    @property
    def folder(self) -> Path:
        return self.path.parent

    @property
    def servelab(self) -> dict:
        return table(self.result, "servelab")

    @property
    def engine(self) -> dict:
        return table(self.servelab, "engine")

    @property
    def simulated(self) -> bool:
        """From servelab's simulator: a fast-mode result, a run of the ``sim`` engine, or a
        bench against a sim server (its /v1/models says so)."""
        models = table(table(self.servelab, "provenance"), "server_models")
        data = models.get("data")
        owners = [str(m.get("owned_by", "")) for m in data if isinstance(m, dict)] if isinstance(data, list) else []
        return bool(self.servelab.get("simulated")) or self.engine.get("kind") == "sim" \
            or any("SIMULATED" in o for o in owners)

    def memory(self) -> dict:
        """The engine's memory report (plus measured footprint) for this run."""
        beside = _json_or_none(self.folder / MEMORY_FILE)
        return beside if isinstance(beside, dict) else dict(table(self.engine, "memory_report"))

    def records(self) -> list[dict]:
        """Per-request records (``*.records.jsonl``); [] when they are not there."""
        path = self._beside(self.servelab.get("records_file"), ".records.jsonl")
        return _jsonl(path) if path else []

    def timeline_path(self) -> Path | None:
        return self._beside(table(self.servelab, "telemetry").get("timeline_file"), ".timeline.jsonl")

    def prompts(self) -> list[dict]:
        found = _json_or_none(self.folder / PROMPTS_FILE)
        return found if isinstance(found, list) else []

    def _beside(self, recorded, suffix: str) -> Path | None:
        # A study folder may have moved since: the file's name beside the result wins.
        candidates = [self.path.with_suffix("").with_name(self.path.stem + suffix)]
        if recorded and isinstance(recorded, str) and "\0" not in recorded:  # anything else names no file
            candidates += [self.folder / Path(recorded).name, Path(recorded)]
        return next((p for p in candidates if p.is_file()), None)


def load_runs(paths: list[str | Path]) -> list[Run]:
    runs: list[Run] = []
    for path in map(Path, paths):
        if path.is_dir():
            runs += _from_folder(path)
        elif path.is_file():
            runs += _from_file(path, None)
        else:
            raise InputError(f"{path} does not exist")
    if not runs:
        raise InputError(f"no complete runs found in {', '.join(map(str, paths))}")
    if len({r.study for r in runs if r.study}) > 1:  # two studies' "baseline" are two configs
        for run in runs:
            run.config = f"{run.study}/{run.config}" if run.study else run.config
    return runs


def _from_folder(folder: Path) -> list[Run]:
    markers = sorted(folder.rglob(RUN_MARKER))
    if markers:
        return _in_study_order(folder, [run for m in markers for run in _from_marker(m)])
    found = foreign.read_folder(folder, NOT_RESULTS, _own)
    per_file = {p: [r for q, r in found if q == p] for p, _ in found}
    runs = [Run(r, p, folder.name, repeat=i + 1 if len(rs) > 1 else None)
            for p, rs in per_file.items() for i, r in enumerate(rs)]
    if not runs:
        raise InputError(f"{folder}: no result files (servelab bench --save-result) or study runs in it; "
                         f"expected {foreign.EXPECTED}")
    return runs


def _in_study_order(folder: Path, runs: list[Run]) -> list[Run]:
    """Engines and workloads in the order the study file defines them (not alphabetical)."""
    study = _json_or_none(folder / STUDY_FILE)
    if not isinstance(study, dict):
        return runs
    engines, workloads = list(study.get("engines") or {}), list(study.get("workloads") or {})
    rank = lambda name, order: order.index(name) if name in order else len(order)
    return sorted(runs, key=lambda r: (rank(r.config, engines), rank(r.workload, workloads), r.repeat or 0))


def _from_marker(marker: Path) -> list[Run]:
    info = _json_or_none(marker)
    if not isinstance(info, dict):
        return []  # unreadable marker: treat the run as not done
    result = _json_or_none(marker.parent / info.get("result", RESULT_FILE))
    if not isinstance(result, dict):
        return []
    return [Run(result, marker.parent / info.get("result", RESULT_FILE), str(info.get("engine")),
                str(info.get("workload", "")), info.get("repeat"), info.get("study"))]


def _from_file(path: Path, config: str | None) -> list[Run]:
    results = foreign.read_file(path, _own)
    if not results:
        raise InputError(f"{path}: not a result file servelab knows; expected {foreign.EXPECTED}")
    names = [config or str(r.get("label") or path.stem) for r in results]
    # repeats are numbered within a config: a GuideLLM sweep's load points are configs, not repeats
    return [Run(r, path, name, repeat=names[:i].count(name) + 1 if names.count(name) > 1 else None)
            for i, (r, name) in enumerate(zip(results, names))]


def _own(docs: list) -> list[dict]:
    """servelab's results among a file's documents (``--append-result``: one a line)."""
    return [r for r in docs if isinstance(r, dict) and "output_throughput" in r]


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {path}: {exc}") from None


def _json_or_none(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _jsonl(path: Path) -> list[dict]:
    """The file's JSON objects, one a line; a line cut by a crash (not JSON, or cut inside a
    UTF-8 character) or not an object is skipped: the others still count."""
    rows = []
    with open(path, "rb") as f:
        for line in f:
            try:
                row = json.loads(line.decode("utf-8"))
            except ValueError:  # UnicodeDecodeError is one
                continue
            if isinstance(row, dict):
                rows.append(row)
    return rows


def table(d: dict, key: str) -> dict:
    """``d[key]`` if it is a JSON object, else {}: a field of the wrong type reads as absent."""
    value = d.get(key)
    return value if isinstance(value, dict) else {}


def study_info(paths: list[str | Path]) -> dict | None:
    """``study.json`` of the first argument that is a study folder."""
    for path in map(Path, paths):
        found = _json_or_none(path / STUDY_FILE) if path.is_dir() else None
        if isinstance(found, dict):
            return found
    return None


def run_result(folder: Path) -> dict | None:
    """A study run's result JSON, or None when the run wrote none."""
    found = _json_or_none(Path(folder) / RESULT_FILE)
    return found if isinstance(found, dict) else None


def find_result(path: Path) -> Path:
    """RUN as given to ``diagnose``: a result file, or a folder holding exactly one."""
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
    """One result JSON: a whole file, or the last run of an ``--append-result`` file."""
    text = _text(path)
    for candidate in (text, text.strip().rsplit("\n", 1)[-1]):
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    raise InputError(f"{path}: not a result JSON")
