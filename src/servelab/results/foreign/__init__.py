"""Other tools' result files, read into servelab's result shape: vLLM's keys plus a
``servelab.foreign`` section (tool, version, format, what cannot be computed).

Each format is recognised by what is inside it, never by the file's name; a file may be
JSON, one JSON object a line, or YAML. ``read_file`` answers None for a file none of them
fits, and the caller names what was expected (``EXPECTED``). A folder may hold AIPerf's
summary with its per-request records: ``pair_records`` joins them into one run.
"""

from __future__ import annotations

import json
from pathlib import Path

from servelab.errors import InputError
from servelab.results.foreign import aiperf, guidellm, inference_perf, llmd, sglang, vllm
from servelab.results.foreign.shape import foreign_of

EXPECTED = ("a servelab or `vllm bench serve --save-result` JSON, GuideLLM benchmarks.json, AIPerf "
            "profile_export_aiperf.json or profile_export.jsonl, an inference-perf *_lifecycle_metrics.json or "
            "its per-request file, SGLang bench_serving JSONL, or an llm-d Benchmark Report (JSON or YAML)")
SUFFIXES = (".json", ".jsonl", ".yaml", ".yml")


def documents(path: Path) -> list:
    """The file's JSON value, or its JSON lines, or its YAML documents; [] if none of those."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {path}: {exc}") from None
    try:
        return [json.loads(text)]
    except ValueError:
        pass
    try:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError:
        pass
    return _yaml(text)


def _yaml(text: str) -> list:
    import yaml  # a dependency; imported here so --help stays light

    try:
        return [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError:
        return []


def read_docs(docs: list, stem: str) -> list[dict] | None:
    """Results from a file's documents, or None when no known format fits the first."""
    first = docs[0] if docs else None
    if vllm.recognise(first):
        return [vllm.read(d) for d in docs if isinstance(d, dict)]
    if sglang.recognise(first):
        return [sglang.read(d) for d in docs if isinstance(d, dict)]
    if guidellm.recognise(first):
        return guidellm.read(first, stem)
    if aiperf.recognise_summary(first):
        return [aiperf.read_summary(first)]
    if aiperf.recognise_record(first):
        return [aiperf.read_records([d for d in docs if aiperf.recognise_record(d)])]
    if inference_perf.recognise(first):
        return [inference_perf.read(first)]
    if inference_perf.recognise_requests(first):
        return [inference_perf.read_requests(first)]
    if llmd.recognise(first):
        return [llmd.read(d) for d in docs if llmd.recognise(d)]
    return None


def read_file(path: Path, own=lambda docs: []) -> list[dict]:
    """The file's runs: a foreign format's, else what ``own`` (servelab's reader) finds in its documents."""
    docs = documents(path)
    return read_docs(docs, path.stem) or own(docs)


# servelab's own files beside its results, never results (results/layout.py names the rest)
_NOT_RUNS = (".records.jsonl", ".timeline.jsonl")


def read_folder(folder: Path, skip=(), own=lambda docs: []) -> list[tuple[Path, dict]]:
    """(file, run) for every recognised file in ``folder`` (not below it), files named in
    ``skip`` left out; AIPerf's records join its summary, as one run."""
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in SUFFIXES and p.name not in skip
                   and not p.name.endswith(_NOT_RUNS))
    parsed = [(p, documents(p)) for p in files]
    is_summary = lambda docs: bool(docs) and aiperf.recognise_summary(docs[0])
    is_records = lambda docs: bool(docs) and aiperf.recognise_record(docs[0])
    records = [d for _, docs in parsed if is_records(docs) for d in docs]
    paired = records and any(is_summary(docs) for _, docs in parsed)
    found = []
    for path, docs in parsed:
        if paired and is_records(docs):
            continue  # read with its summary
        if paired and is_summary(docs):
            found.append((path, aiperf.read_summary(docs[0], records)))
            continue
        found += [(path, r) for r in read_docs(docs, path.stem) or own(docs)]
    return _one_inference_perf_run(found)


def _one_inference_perf_run(found: list[tuple[Path, dict]]) -> list[tuple[Path, dict]]:
    """inference-perf writes one run as several files (per request, per stage, summary, its own
    llm-d report): with the per-request file there, it is the run and the others are views of it."""
    def kind(result: dict) -> str:
        f = foreign_of(result) or {}
        return "" if f.get("tool") != "inference-perf" else ("run" if f["format"] == inference_perf.PER_REQUEST
                                                              else "view")
    runs = [(p, r) for p, r in found if kind(r) == "run"]
    views = [p.name for p, r in found if kind(r) == "view"]
    if not runs or not views:
        return found
    for _, r in runs:
        foreign_of(r)["notes"].append(f"read from its per-request file; {', '.join(views)} beside it: "
                                      "views of the same run, not repeats")
    return [(p, r) for p, r in found if kind(r) != "view"]
