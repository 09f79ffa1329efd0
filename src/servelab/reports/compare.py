"""The comparison: a row per metric, a column per config, each against a baseline.

Pure: runs (already read) in, ``Table`` values out; rendering is in ``table.py``.
A study gives one table per workload (comparing configs under different loads
would compare the loads); loose results give one table, and say where their
load differs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from servelab.errors import InputError
from servelab.reports import quality_rows
from servelab.reports import verdict as v
from servelab.reports.quality_rows import QualityRow
from servelab.results.foreign.shape import DIFFERENT, foreign_of
from servelab.results.runs import Run
from servelab.telemetry import machine


@dataclass(frozen=True, slots=True)
class Metric:
    key: str  # result JSON key (or memory report key when ``memory``)
    label: str
    higher_is_better: bool
    digits: int = 1
    memory: bool = False  # a number the engine reports once: no noise, exact verdict

    @property
    def tail(self) -> bool:
        """Latencies (TTFT, TPOT, ITL, E2EL statistics) get the wider floor: under
        queueing they move more between engine starts than throughput does."""
        return self.key.endswith("_ms")

    @property
    def arrow(self) -> str:
        return "↑" if self.higher_is_better else "↓"


def _latency(name: str, label: str) -> list[Metric]:
    return [Metric(f"{stat}_{name}_ms", f"{stat if stat != 'p99' else 'P99'} {label} ms", False)
            for stat in ("mean", "median", "p99")]


METRICS: list[Metric] = [
    Metric("total_token_throughput", "total tok/s", True),
    Metric("output_throughput", "output tok/s", True),
    Metric("request_throughput", "req/s", True, 3),
    *_latency("ttft", "TTFT"), *_latency("tpot", "TPOT"), *_latency("itl", "ITL"), *_latency("e2el", "E2EL"),
    # another tool's metric whose definition is not vLLM's: its own rows, marked ≠ (results/foreign/shape.py)
    *_latency("tpot_incl_first", "≠ TPOT incl. 1st token"), *_latency("itl_tool", "≠ ITL, tool's own"),
    # servelab's own figures (a dotted path into the result's ``servelab`` section): the steady window
    # (metrics/steady.py), energy and cost (metrics/energy.py); rows appear only where runs have them
    Metric("steady_state.output_tok_s", "steady output tok/s", True),
    Metric("steady_state.req_s", "steady req/s", True, 3),
    Metric("energy.run.j_per_output_token", "J/output token", False, 4),
    Metric("energy.steady_state.j_per_output_token", "steady J/output token", False, 4),
    Metric("energy.cost.run.per_million_output_tokens", "$/1M output tokens", False, 4),
    Metric("energy.cost.run.per_million_total_tokens", "$/1M total tokens", False, 4),
    Metric("energy.cost.steady_state.per_million_output_tokens", "steady $/1M output tokens", False, 4),
    Metric("weights_gib", "model weights GiB", False, 3, memory=True),
    Metric("kv_cache_tokens", "KV cache tokens", True, 0, memory=True),
    Metric("max_concurrency", "max concurrency ×", True, 2, memory=True),
]
METRIC_KEYS = {m.key for m in METRICS}


@dataclass(frozen=True, slots=True)
class Comparison:
    ratio: float | None
    change_pct: float | None
    verdict: str


@dataclass(slots=True)
class Row:
    metric: Metric
    cells: dict[str, v.Spread | None]  # config -> values over its repeats (None: not measured)
    versus: dict[str, Comparison | None] = field(default_factory=dict)  # non-baseline configs


@dataclass(slots=True)
class Table:
    workload: str
    configs: list[str]
    baseline: str
    rows: list[Row]
    load: str = ""  # the baseline's load, in words
    repeats: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    estimated: set[str] = field(default_factory=set)  # "config/metric" from an estimate, not the engine
    quality: list[QualityRow] = field(default_factory=list)  # agreement and task score (quality_rows.py)


def build_tables(runs: list[Run], baseline: str | None = None, floor: float = v.NOISE_FLOOR,
                 allow_simulated: bool = False) -> list[Table]:
    """One table per workload, configs in first-seen order, baseline first."""
    workloads = list(dict.fromkeys(r.workload for r in runs))
    known = list(dict.fromkeys(r.config for r in runs))
    if baseline is not None and baseline not in known:
        raise InputError(f"--baseline {baseline!r} is not one of the configs: {', '.join(known)}")
    note = simulated_note(runs, allow_simulated)
    tables = [_table(w, [r for r in runs if r.workload == w], baseline, floor) for w in workloads]
    for table in tables:
        table.notes += [note] if note else []
    return tables


def simulated_note(runs: list[Run], allow: bool) -> str | None:
    """Simulated and measured runs are not compared unless asked; either way it is said."""
    sim = list(dict.fromkeys(r.config for r in runs if r.simulated))
    real = list(dict.fromkeys(r.config for r in runs if not r.simulated))
    if sim and real and not allow:
        raise InputError(f"refusing to compare simulated ({', '.join(sim)}) with measured ({', '.join(real)}) "
                         "runs; pass --allow-simulated to show them side by side anyway")
    if not (sim and real):
        return None  # all simulated: each run's own ⚠ line says so
    return (f"⚠ SIMULATED beside measured (--allow-simulated): {', '.join(sim)} simulated, {', '.join(real)} "
            "measured; a verdict between them compares a model with a measurement")


def _table(workload: str, runs: list[Run], baseline: str | None, floor: float) -> Table:
    configs = list(dict.fromkeys(r.config for r in runs))
    base = baseline if baseline in configs else configs[0]
    configs = [base] + [c for c in configs if c != base]
    by_config = {c: [r for r in runs if r.config == c] for c in configs}
    table = Table(workload, configs, base, [], load=load_text(by_config[base][0]),
                  repeats={c: len(rs) for c, rs in by_config.items()})
    for metric in METRICS:
        row = _row(metric, by_config, base, floor, table)
        if any(cell is not None for cell in row.cells.values()):
            table.rows.append(row)
    table.quality, said = quality_rows.rows(by_config, base)
    table.notes += said
    if baseline is not None and baseline != base:
        table.notes.append(f"{baseline} did not run workload {workload}: {base} is the baseline here")
    table.notes += conditions_notes(by_config)
    table.notes += foreign_notes(by_config, [row.metric.key for row in table.rows])
    return table


def foreign_notes(by_config: dict[str, list[Run]], keys: list[str]) -> list[str]:
    """Where a config's runs come from another tool: which, what it cannot give, whether its
    per-request lists were a sample; and what a ≠ row means, once."""
    notes = []
    for config, runs in by_config.items():
        seen: list[str] = []
        for run in runs:
            f = foreign_of(run.result)
            if f is None:
                continue
            version = "(version not recorded)" if f["version"] == "not recorded" else f["version"]
            lines = [f"{config}: from {f['tool']} {version} ({f['format']})"]
            lines += [f"⚠ {config}: {n}" for n in f.get("notes") or []]
            lines += [f"{config}: {f['sampled']}; no steady state from a sample"] if f.get("sampled") else []
            if f.get("not_computable"):
                lines.append(f"{config}: cannot be computed from this file: {'; '.join(f['not_computable'])}")
            seen += [line for line in lines if line not in seen]
        notes += seen
    for name, meaning in DIFFERENT.items():
        if any(k.endswith(f"_{name}_ms") for k in keys):
            notes.append(f"≠ rows: not vLLM's definition — {meaning}")
    return notes


def _row(metric: Metric, by_config: dict[str, list[Run]], base: str, floor: float, table: Table) -> Row:
    cells = {c: spread(metric, rs, table.estimated, c) for c, rs in by_config.items()}
    row = Row(metric, cells)
    for config in by_config:
        if config != base:
            row.versus[config] = compare(metric, cells[base], cells[config], floor)
    return row


def spread(metric: Metric, runs: list[Run], estimated: set[str] | None = None, config: str = "") -> v.Spread | None:
    values = [x for x in (metric_value(metric, r, estimated, config) for r in runs) if x is not None]
    return v.Spread(tuple(values)) if values else None


def metric_value(metric: Metric, run: Run, estimated: set[str] | None = None, config: str = "") -> float | None:
    if "." in metric.key:
        return _finite(_walk(run.servelab, metric.key.split(".")))
    if not metric.memory:
        return _finite(run.result.get(metric.key))
    memory = run.memory()
    value = _finite(memory.get(metric.key))
    if value is None and metric.key == "weights_gib":  # vLLM's CPU build does not log it
        value = unreported_weights(memory)
        if value is not None and estimated is not None:
            estimated.add(f"{config}/{metric.key}")
    return value


def unreported_weights(memory: dict) -> float | None:
    """Model weights the engine did not report: servelab plan's, for the dtype the engine serves
    (a bf16 checkpoint served in float32, as vLLM's CPU build does on AMX CPUs, holds twice its
    files' size), else the checkpoint files' size."""
    planned = _finite(((memory.get("plan") or {}).get("memory_report") or {}).get("weights_gib"))
    return planned if planned is not None else _finite(memory.get("checkpoint_gib"))


def _walk(section, path: list[str]):
    for name in path:
        section = section.get(name) if isinstance(section, dict) else None
    return section


def _finite(x) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def compare(metric: Metric, base: v.Spread | None, other: v.Spread | None, floor: float) -> Comparison | None:
    if base is None or other is None:
        return None
    ratio = v.ratio(base.mean, other.mean)
    change = (ratio - 1) * 100 if ratio is not None else None
    if metric.memory:
        return Comparison(ratio, change, v.exact_verdict(base.mean, other.mean, metric.higher_is_better))
    floor = floor * v.TAIL_FACTOR if metric.tail else floor
    return Comparison(ratio, change, v.verdict(base, other, metric.higher_is_better, floor))


def load_of(run: Run) -> dict:
    """The load a run was under, from its own flags and counts."""
    flags = (run.servelab.get("provenance") or {}).get("flags") or {}
    r = run.result
    done = r.get("completed") or 0
    return {"dataset": flags.get("dataset_name"), "num_prompts": r.get("num_prompts"),
            "max_concurrency": r.get("max_concurrency"), "request_rate": r.get("request_rate"),
            "seed": flags.get("seed"),
            "input_len": round(r["total_input_tokens"] / done) if done else None,
            "output_len": round(r["total_output_tokens"] / done) if done else None}


def load_text(run: Run) -> str:
    x = load_of(run)
    conc = x["max_concurrency"] if x["max_concurrency"] is not None else "∞"
    return (f"{x['dataset'] or 'dataset ?'} · {x['num_prompts']} prompts · ~{x['input_len']} in / "
            f"~{x['output_len']} out tokens · max concurrency {conc} · rate {x['request_rate']} · seed {x['seed']}")


# A config's load may differ from the baseline's in these without the comparison lying:
_LOAD_TOLERANCE = {"input_len": 0.1, "output_len": 0.1}


def conditions_notes(by_config: dict[str, list[Run]]) -> list[str]:
    """Where a config's load is not the baseline's, or a run says its numbers are suspect."""
    configs = list(by_config)
    base = load_of(by_config[configs[0]][0])
    notes = []
    for config in configs[1:]:
        diff = load_differences(base, load_of(by_config[config][0]))
        if diff:
            notes.append(f"⚠ {config}: load differs from the baseline's ({'; '.join(diff)})")
    for config, runs in by_config.items():
        notes += _run_flags(config, runs)
    return notes


def load_differences(base: dict, other: dict) -> list[str]:
    out = []
    for key, value in base.items():
        theirs = other.get(key)
        tol = _LOAD_TOLERANCE.get(key)
        if tol and isinstance(value, (int, float)) and isinstance(theirs, (int, float)) and value:
            same = abs(theirs - value) <= tol * abs(value)
        else:
            same = theirs == value or theirs is None or value is None
        if not same:
            out.append(f"{key} {theirs} vs {value}")
    return out


def _run_flags(config: str, runs: list[Run]) -> list[str]:
    notes = []
    for run in runs:
        s, tag = run.servelab, f"{config}" + (f" repeat {run.repeat}" if run.repeat else "")
        if run.simulated:
            notes.append(f"⚠ {tag}: SIMULATED result, not a measurement")
        if s.get("client_bound"):
            notes.append(f"⚠ {tag}: the client may limit this run ({'; '.join(s['client_bound'])})")
        if shared := machine.warning(s.get("machine")):
            notes.append(f"⚠ {tag}: {shared}")
        if s.get("interrupted"):
            notes.append(f"⚠ {tag}: interrupted; covers only the requests completed")
        if run.result.get("failed"):
            notes.append(f"⚠ {tag}: {run.result['failed']} failed requests")
    return notes
