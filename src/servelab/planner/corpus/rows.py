"""Published vLLM measurements the planner is judged and fitted against, and the split between the two.

Why a corpus: the planner's arithmetic is exact where everything is known (bytes per KV token, whole
blocks), but vLLM's non-KV memory and the speed real kernels reach can only be learned from real
starts and real benchmarks. ``memory.toml`` holds startup logs (weights, KV GiB/tokens and the flags
that set the budget), ``speed.toml`` benchmark results with a workload that replays offline. Each
row names its source (URL or, for this repository's own engine, a path) and the vLLM version.

The split (fixed in the repository before any constant was fitted): rows are grouped by
configuration, (model, GPU); the groups are ordered by their earliest source date, then by name;
every third group, counting from the first (positions 2, 5, 8, ...), is held out whole. A held-out
row never reaches a fit (``fit_rows`` refuses it), so its error is the error a user meets on a
model and GPU the constants never saw.

Growing the corpus: the rule counts positions, so a new group dated before existing ones shifts
which groups are held out, and a row the fit has seen could become "held out".
tests/planner/test_corpus.py pins the held-out set: add rows of existing groups, or groups dated
after the last one, and refit (tools/plan_accuracy.py --fit); if the pin must change, the fit
must be redone and the commit must say so. New groups dated between two existing ones keep every
existing row on its side when they come in a block of three consecutive positions (each existing
group's position then moves by a multiple of three); the third of the block is held out.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from servelab.errors import InputError

HERE = Path(__file__).parent
MEMORY_FILE, SPEED_FILE = "memory.toml", "speed.toml"
ERAS = ("v0", "v1", "cpu")
DATASETS = ("fixed", "random", "sharegpt")
MEMORY_FIGURES = {"weights_gib", "non_torch_gib", "activation_gib", "kv_gib", "kv_tokens", "num_blocks",
                  "max_model_len_fit", "kv_needed_gib"}
SPEED_FIGURES = {"output_tok_s", "mean_ttft_ms", "mean_tpot_ms", "req_per_s"}


@dataclass(frozen=True, slots=True)
class Source:
    """Where a row's figures come from: a URL (or ``servelab:PATH``), its date, the vLLM version."""

    url: str
    date: str
    vllm_version: str


@dataclass(frozen=True, slots=True)
class MemoryRow:
    """One vLLM start: the flags that set its memory budget and the figures its log printed.
    None = the source does not say (the planner then applies vLLM's default)."""

    id: str
    source: Source
    model: str
    gpu: str
    era: str
    measured: dict[str, float]
    gpu_total_gib: float | None = None
    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None
    tensor_parallel: int = 1
    quantization: str | None = None
    kv_cache_dtype: str = "auto"
    dtype_bytes: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enforce_eager: bool = False
    cpu_kv_space_gib: int | None = None
    notes: str = ""


@dataclass(frozen=True, slots=True)
class Workload:
    """What the benchmark sent: lengths, how many, and at what concurrency or rate."""

    dataset: str
    input_len: int
    output_len: int
    num_prompts: int
    max_concurrency: int | None = None
    request_rate: float | None = None

    @property
    def under_load(self) -> bool:
        """More than one request at a time may run (a higher concurrency, or none and a burst or a
        rate): the simulated engine replays it; at concurrency 1 the closed form does."""
        return self.max_concurrency != 1


@dataclass(frozen=True, slots=True)
class SpeedRow:
    id: str
    source: Source
    model: str
    gpu: str
    workload: Workload
    measured: dict[str, float]
    tensor_parallel: int = 1
    quantization: str | None = None
    enforce_eager: bool = False
    max_num_seqs: int | None = None
    notes: str = ""

    @property
    def output_tok_s(self) -> float | None:
        """As printed, or request throughput x output length where the source printed only that."""
        if "output_tok_s" in self.measured:
            return self.measured["output_tok_s"]
        rps = self.measured.get("req_per_s")
        return None if rps is None else rps * self.workload.output_len


@dataclass(frozen=True, slots=True)
class Corpus:
    memory: tuple[MemoryRow, ...]
    speed: tuple[SpeedRow, ...]
    held_out_ids: frozenset[str] = field(default=frozenset())

    def held_out(self, row: MemoryRow | SpeedRow) -> bool:
        return row.id in self.held_out_ids


def load_corpus(folder: Path | None = None) -> Corpus:
    """Both files, checked; a bad row is one ``InputError`` naming the file, the row and the field."""
    base = folder or Path(str(resources.files(__package__)))
    memory = tuple(_memory_row(MEMORY_FILE, raw) for raw in _rows(base / MEMORY_FILE))
    speed = tuple(_speed_row(SPEED_FILE, raw) for raw in _rows(base / SPEED_FILE))
    _unique(memory + speed)
    return Corpus(memory, speed, frozenset(held_out_ids(memory) | held_out_ids(speed)))


def held_out_ids(rows) -> set[str]:
    """The split rule (see the module docstring): every third (model, GPU) group by earliest date."""
    groups: dict[tuple[str, str], list] = {}
    for row in rows:
        groups.setdefault((row.model, row.gpu), []).append(row)
    order = sorted(groups, key=lambda key: (min(r.source.date for r in groups[key]), key))
    return {row.id for position, key in enumerate(order) if position % 3 == 2 for row in groups[key]}


def fit_rows(corpus: Corpus, rows):
    """The rows a fit may see. A fit given a held-out row is a bug in the fit, so it stops here."""
    rows = tuple(rows)
    leaked = [row.id for row in rows if corpus.held_out(row)]
    if leaked:
        raise InputError(f"corpus: held-out rows may not be fitted: {', '.join(leaked)}")
    return rows


def _rows(path: Path) -> list[dict]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"corpus {path.name}: {exc}") from None
    rows = data.get("row")
    if not isinstance(rows, list) or not rows:
        raise InputError(f"corpus {path.name}: no [[row]] tables")
    return rows


def _source(name: str, raw: dict) -> Source:
    url = _text(name, raw, "source")
    if not url.startswith(("https://", "servelab:")):
        raise InputError(f"corpus {name}, row {raw.get('id')!r}: source must be an https:// URL or servelab:PATH")
    return Source(url, _text(name, raw, "date"), _text(name, raw, "vllm_version"))


def _text(name: str, raw: dict, key: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"corpus {name}, row {raw.get('id')!r}: field {key!r} is missing or empty")
    return value


def _figures(name: str, raw: dict, allowed: set[str]) -> dict[str, float]:
    measured = raw.get("measured")
    if not isinstance(measured, dict) or not measured:
        raise InputError(f"corpus {name}, row {raw.get('id')!r}: field 'measured' is missing or empty")
    for key, value in measured.items():
        if key not in allowed or isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(f"corpus {name}, row {raw.get('id')!r}: measured.{key} is unknown or not a number")
    return {key: float(value) for key, value in measured.items()}


def _known(name: str, raw: dict, allowed: tuple[str, ...]) -> None:
    """A misspelt flag would silently take vLLM's default; refuse it instead."""
    unknown = sorted(set(raw) - set(allowed) - set(_COMMON))
    if unknown:
        raise InputError(f"corpus {name}, row {raw.get('id')!r}: unknown field {unknown[0]!r}")


def _memory_row(name: str, raw: dict) -> MemoryRow:
    _known(name, raw, _MEMORY_OPTIONAL + ("era",))
    extra = {key: raw[key] for key in _MEMORY_OPTIONAL if key in raw}
    row = MemoryRow(id=_text(name, raw, "id"), source=_source(name, raw), model=_text(name, raw, "model"),
                    gpu=_text(name, raw, "gpu"), era=_text(name, raw, "era"),
                    measured=_figures(name, raw, MEMORY_FIGURES), **extra)
    if row.era not in ERAS:
        raise InputError(f"corpus {name}, row {row.id!r}: era must be one of {', '.join(ERAS)}")
    return row


def _speed_row(name: str, raw: dict) -> SpeedRow:
    work = raw.get("workload")
    if not isinstance(work, dict) or work.get("dataset") not in DATASETS:
        raise InputError(f"corpus {name}, row {raw.get('id')!r}: workload.dataset must be one of "
                         f"{', '.join(DATASETS)}")
    _known(name, raw, _SPEED_OPTIONAL + ("workload",))
    try:
        workload = Workload(**work)
    except TypeError as exc:
        raise InputError(f"corpus {name}, row {raw.get('id')!r}: workload: {exc}") from None
    extra = {key: raw[key] for key in _SPEED_OPTIONAL if key in raw}
    return SpeedRow(id=_text(name, raw, "id"), source=_source(name, raw), model=_text(name, raw, "model"),
                    gpu=_text(name, raw, "gpu"), workload=workload,
                    measured=_figures(name, raw, SPEED_FIGURES), **extra)


_MEMORY_OPTIONAL = ("gpu_total_gib", "gpu_memory_utilization", "max_model_len", "tensor_parallel", "quantization",
                    "kv_cache_dtype", "dtype_bytes", "max_num_seqs", "max_num_batched_tokens", "enforce_eager",
                    "cpu_kv_space_gib", "notes")
_COMMON = ("id", "source", "date", "vllm_version", "model", "gpu", "measured")
_SPEED_OPTIONAL = ("tensor_parallel", "quantization", "enforce_eager", "max_num_seqs", "notes")


def _unique(rows) -> None:
    seen: set[str] = set()
    for row in rows:
        if row.id in seen:
            raise InputError(f"corpus: row id {row.id!r} appears twice")
        seen.add(row.id)
