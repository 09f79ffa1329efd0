"""A dated public reference as one more column: someone else's published numbers.

File (TOML or JSON)::

    source = "vLLM v0.6.0 performance blog"     # required
    date = 2024-09-05                           # required: numbers age
    url = "https://blog.vllm.ai/2024/09/05/perf-update.html"
    hardware = "1x H100 80GB"
    engine = "vllm"
    engine_version = "0.6.0"
    model = "meta-llama/Meta-Llama-3-8B-Instruct"
    [workload]                                   # what load the numbers are under
    dataset = "sharegpt"
    input_len = 1024
    output_len = 128
    num_prompts = 1000
    max_concurrency = 64
    request_rate = "inf"
    [numbers]                                    # result JSON keys, as in compare's rows
    output_throughput = 3200.0
    mean_ttft_ms = 250

It gets the same ratio and change against the baseline, no verdict (one number
has no noise we know of), and a warning for every condition that differs from
the baseline's (hardware, engine version, model, load).
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from servelab.errors import InputError
from servelab.reports import verdict as v
from servelab.reports.compare import METRIC_KEYS, Comparison, Table, load_of
from servelab.results.runs import Run

FIELDS = ("source", "date", "url", "hardware", "engine", "engine_version", "model", "workload", "numbers", "notes")
WORKLOAD_FIELDS = ("dataset", "input_len", "output_len", "num_prompts", "max_concurrency", "request_rate", "seed")
REFERENCE = "reference"  # the verdict cell of a reference column


@dataclass(frozen=True, slots=True)
class Reference:
    source: str
    date: str
    numbers: dict[str, float]
    url: str = ""
    hardware: str = ""
    engine: str = ""
    engine_version: str = ""
    model: str = ""
    workload: dict = field(default_factory=dict)
    notes: str = ""

    @property
    def label(self) -> str:
        return f"ref: {self.source} ({self.date})"


def load_reference(path: str | Path) -> Reference:
    path = Path(path)
    data = _parse(path)
    where = f"reference {path.name}"
    for key in data:
        if key not in FIELDS:
            raise InputError(f"{where}: unknown field {key!r} (expected one of: {', '.join(FIELDS)})")
    for key in ("source", "date", "numbers"):
        if not data.get(key):
            raise InputError(f"{where}: {key} is required (a reference without a source and date cannot be trusted)")
    numbers = _numbers(data["numbers"], where)
    workload = data.get("workload") or {}
    for key in workload:
        if key not in WORKLOAD_FIELDS:
            raise InputError(f"{where}: workload.{key}: unknown field (expected one of: {', '.join(WORKLOAD_FIELDS)})")
    text = {k: str(data.get(k, "")) for k in ("url", "hardware", "engine", "engine_version", "model", "notes")}
    return Reference(source=str(data["source"]), date=str(data["date"]), numbers=numbers, workload=workload, **text)


def _parse(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read reference {path}: {exc}") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"reference {path.name}: not valid {'JSON' if path.suffix == '.json' else 'TOML'} ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(f"reference {path.name}: expected a table of fields")
    return data


def _numbers(table, where: str) -> dict[str, float]:
    if not isinstance(table, dict):
        raise InputError(f"{where}: numbers must be a table of metric = value")
    out = {}
    for key, value in table.items():
        if key not in METRIC_KEYS:
            raise InputError(f"{where}: numbers.{key}: not a compared metric (use e.g. output_throughput, mean_ttft_ms)")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(f"{where}: numbers.{key}: expected a number, got {value!r}")
        out[key] = float(value)
    return out


def add_reference(table: Table, ref: Reference, base_run: Run) -> None:
    """Append ``ref`` as a column of ``table``, with its ratios and its differing conditions."""
    table.configs.append(ref.label)
    table.repeats[ref.label] = 1
    for row in table.rows:
        value = ref.numbers.get(row.metric.key)
        row.cells[ref.label] = v.Spread((value,)) if value is not None else None
        base = row.cells.get(table.baseline)
        ratio = v.ratio(base.mean, value) if base is not None and value is not None else None
        row.versus[ref.label] = Comparison(ratio, (ratio - 1) * 100 if ratio is not None else None, REFERENCE)
    diff = differences(ref, base_run)
    link = f" <{ref.url}>" if ref.url else ""
    table.notes.append(f"{ref.label}{link}: " + ("⚠ conditions differ from the baseline's: " + "; ".join(diff)
                                                 if diff else "conditions match the baseline's as far as stated"))


def differences(ref: Reference, base_run: Run) -> list[str]:
    """Stated conditions of the reference that are not the baseline's."""
    ours = _our_conditions(base_run)
    out = []
    for key, theirs in [("hardware", ref.hardware), ("engine_version", ref.engine_version), ("model", ref.model)]:
        if theirs and ours.get(key) and not _same_text(theirs, ours[key]):
            out.append(f"{key} {theirs!r} vs ours {ours[key]!r}")
    load = load_of(base_run)
    for key, theirs in ref.workload.items():
        mine = load.get(key)
        if mine is not None and str(theirs) != str(mine):
            out.append(f"{key} {theirs} vs ours {mine}")
    return out


def _our_conditions(run: Run) -> dict:
    study = run.servelab.get("study") or {}
    hw = study.get("hardware") or {}
    gpus = ", ".join(hw.get("gpus") or []) or (f"CPU only: {hw['cpu']}" if hw.get("cpu") else "")
    return {"hardware": gpus, "engine_version": run.engine.get("version") or "",
            "model": Path(str(run.engine.get("model") or run.result.get("model_id") or "")).name}


def _same_text(a: str, b: str) -> bool:
    a, b = a.lower().strip(), b.lower().strip()
    return a in b or b in a
