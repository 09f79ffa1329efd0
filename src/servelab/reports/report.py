"""A study's report: everything the HTML and Markdown pages show, gathered from the
runs on disk, then written as ``report.html`` (self-contained: inline CSS and SVG,
no script, no network) and ``report.md`` beside the study's results.

    html, md = write_report(Path("results/demo"))
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from servelab import __version__
from servelab.reports import methodology, plots
from servelab.reports import verdict as v
from servelab.reports.compare import METRICS, Table, build_tables, metric_value
from servelab.results.layout import REPORT_HTML, REPORT_MD
from servelab.results.plots import has_matplotlib
from servelab.results.runs import Run, load_runs, study_info
from servelab.reports.table import grid

PROMPT_CHARS = 1500  # longer sample prompts are cut (the point is what they look like)


@dataclass(slots=True)
class Report:
    title: str
    description: str
    generated: str
    tables: list[Table]
    floor: float
    memory: list[dict]  # per config: name, weights, KV cache, other (GiB), estimated, kv tokens…
    figures: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # section -> [(caption, svg)]
    prompts: dict[str, list[dict]] = field(default_factory=dict)
    diagnoses: list[dict] = field(default_factory=list)
    hardware: str = ""
    engines: list[tuple[str, str]] = field(default_factory=list)
    launches: list[tuple[str, str]] = field(default_factory=list)
    workloads: list[tuple[str, str]] = field(default_factory=list)
    limits: list[str] = field(default_factory=list)
    plot_note: str = ""
    version: str = __version__

    def grids(self):
        return [(t, *grid(t)) for t in self.tables]


def write_report(folder: Path, baseline: str | None = None, floor: float = v.NOISE_FLOOR,
                 allow_simulated: bool = False, paths: list[Path] | None = None) -> tuple[Path, Path]:
    """The pages for ``paths`` (default: ``[folder]``; any mix of servelab's and other tools'
    results), written into ``folder``."""
    from servelab.reports.html import render_html
    from servelab.reports.markdown import render_markdown

    report = build_report(paths or [folder], baseline, floor, allow_simulated)
    Path(folder).mkdir(parents=True, exist_ok=True)
    html, md = Path(folder) / REPORT_HTML, Path(folder) / REPORT_MD
    html.write_text(render_html(report), encoding="utf-8")
    md.write_text(render_markdown(report), encoding="utf-8")
    return html, md


def build_report(paths: list[Path], baseline: str | None = None, floor: float = v.NOISE_FLOOR,
                 allow_simulated: bool = False) -> Report:
    runs = load_runs(paths)
    study = study_info(paths)
    tables = build_tables(runs, baseline, floor, allow_simulated)
    first_of = _first_by(runs, lambda r: r.config)
    report = Report(
        title=("SIMULATED · " if any(r.simulated for r in runs) else "")
        + (f"Study {study['name']}" if study else "servelab comparison"),
        description=(study or {}).get("description", ""), generated=time.strftime("%Y-%m-%d %H:%M:%S"),
        tables=tables, floor=floor, memory=[memory_budget(c, r) for c, r in first_of.items()],
        prompts=_prompts(runs), diagnoses=_diagnoses(runs),
        hardware=methodology.hardware_text(study, runs), engines=methodology.engine_rows(first_of),
        launches=methodology.launch_rows(first_of),
        workloads=methodology.workload_rows(_first_by(runs, lambda r: r.workload), _repeats(runs)),
        limits=methodology.limits(runs, floor))
    _add_figures(report, runs, tables)
    return report


def _first_by(runs: list[Run], key) -> dict[str, Run]:
    out: dict[str, Run] = {}
    for run in runs:
        out.setdefault(key(run), run)
    return out


def _repeats(runs: list[Run]) -> dict[str, int]:
    counts: dict[tuple[str, str], int] = {}
    for r in runs:
        counts[(r.workload, r.config)] = counts.get((r.workload, r.config), 0) + 1
    return {w: max(n for (w2, _), n in counts.items() if w2 == w) for w, _ in counts}


def memory_budget(config: str, run: Run) -> dict:
    """Weights / KV cache / other, in GiB. "Other" is what the engine's processes held
    beyond both (CPU build: their PSS; GPU: NVML's used memory, when telemetry has it)."""
    mem = run.memory()
    weights = metric_value(next(m for m in METRICS if m.key == "weights_gib"), run)
    estimated = mem.get("weights_gib") is None and weights is not None
    kv = mem.get("kv_cache_gib")
    total, source = _measured_total(run, mem)
    other = max(0.0, total - (weights or 0) - (kv or 0)) if total is not None else None
    return {"name": config, "weights": weights, "KV cache": kv, "other": other, "total": total,
            "total_source": source, "estimated": estimated, "kv_tokens": mem.get("kv_cache_tokens"),
            "max_concurrency": mem.get("max_concurrency"), "max_concurrency_tokens": mem.get("max_concurrency_tokens"),
            **_predicted(mem)}


def _predicted(mem: dict) -> dict:
    """servelab plan's KV tokens for this engine (stored beside the run), and its error against the engine's."""
    plan = mem.get("plan") or {}
    return {"kv_tokens_predicted": (plan.get("memory_report") or {}).get("kv_cache_tokens"),
            "kv_tokens_error": (plan.get("errors") or {}).get("kv_cache_tokens")}


def _measured_total(run: Run, mem: dict) -> tuple[float | None, str]:
    gpu = ((run.servelab.get("telemetry") or {}).get("gpu") or {})
    used = [d.get("mem_used_gib_max") for d in gpu.get("devices") or [] if d.get("mem_used_gib_max")]
    if used:
        return sum(used), "GPU memory used (NVML, peak during the run)"
    device = (run.engine.get("config") or {}).get("device_config")
    if mem.get("footprint_gib") and device == "cpu":
        return mem["footprint_gib"], "engine processes' memory (PSS) after warm-up"
    return None, "not measured"


def _add_figures(report: Report, runs: list[Run], tables: list[Table]) -> None:
    if not has_matplotlib():
        report.plot_note = "matplotlib is not installed (pip install 'servelab[plot]'): no plots."
        return
    colors = {c: plots.PALETTE[i % len(plots.PALETTE)] for i, c in enumerate(dict.fromkeys(r.config for r in runs))}
    if any(m["weights"] or m["KV cache"] for m in report.memory):
        report.figures["memory"] = [("memory budget per engine", plots.memory_bars(report.memory))]
    for table in tables:
        mine = [r for r in runs if r.workload == table.workload]
        report.figures.setdefault("throughput", []).append(_throughput(table, colors))
        report.figures.setdefault("latency", []).extend(_latency(table, mine, colors))
        report.figures.setdefault("timeline", []).append(_timeline(table, mine, colors))
        engine = _engine_rates(table, mine, colors)
        if engine is not None:
            report.figures["timeline"].append(engine)


def _caption(table: Table, what: str) -> str:
    return f"{what} — workload {table.workload}" if table.workload else what


def _throughput(table: Table, colors) -> tuple[str, str]:
    series = {}
    for key, label in (("output_throughput", "output tok/s"), ("request_throughput", "requests/s")):
        row = next((r for r in table.rows if r.metric.key == key), None)
        if row is not None:
            series[label] = [(c.mean, c.lo, c.hi) if c else (0.0, 0.0, 0.0)
                             for c in (row.cells.get(cfg) for cfg in table.configs)]
    svg = plots.throughput_bars(table.configs, series, colors)
    return _caption(table, "throughput (bar: mean over repeats; whiskers: min–max)"), svg


def _latency(table: Table, runs: list[Run], colors) -> list[tuple[str, str]]:
    ttft = {c: [] for c in table.configs}
    itl = {c: [] for c in table.configs}
    for run in runs:
        for rec in run.records():
            if rec.get("error") is None and rec.get("ttft_ms") is not None:
                ttft[run.config].append(rec["ttft_ms"])
                itl[run.config] += itl_gaps(rec)
    return [(_caption(table, "TTFT distribution (all repeats pooled)"), plots.distributions(ttft, colors, "TTFT (ms)")),
            (_caption(table, "ITL distribution (all repeats pooled)"), plots.distributions(itl, colors, "ITL (ms)"))]


def itl_gaps(rec: dict) -> list[float]:
    """Gaps between token-bearing events; a k-token event's gap split in k (servelab's ITL rule)."""
    times, counts = rec.get("token_ms") or [], rec.get("token_counts") or []
    gaps = []
    for j in range(1, len(times)):
        k = counts[j] if j < len(counts) and counts[j] > 0 else 1
        gaps += [(times[j] - times[j - 1]) / k] * k
    return gaps


def in_flight_series(records: list[dict]) -> tuple[list[float], list[int]]:
    """Requests in flight over time, from [sent, done) of every request: (seconds, count) steps."""
    edges = sorted([(r["sent_ms"], 1) for r in records] + [(r["done_ms"], -1) for r in records],
                   key=lambda e: (e[0], e[1]))  # an end at t before a start at t
    xs, ys, level = [0.0], [0], 0
    for t, step in edges:
        level += step
        xs.append(t / 1000.0)
        ys.append(level)
    return xs, ys


def _timeline(table: Table, runs: list[Run], colors) -> tuple[str, str]:
    panels = []
    for config in table.configs:
        mine = [r for r in runs if r.config == config]
        lines = [(f"repeat {r.repeat or i + 1}", *in_flight_series(r.records())) for i, r in enumerate(mine)]
        panels.append({"config": config, "lines": lines, "engine": _engine_lines(mine[0])})
    caption = "requests in flight per run (client side, solid; engine running/waiting from telemetry, dashed)"
    return _caption(table, caption), plots.in_flight(panels, colors)


def _engine_samples(run: Run) -> list[dict]:
    """The run's good engine samples from its telemetry timeline, t ≥ 0; [] without one."""
    path = run.timeline_path()
    if path is None:
        return []
    try:
        samples = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()[1:] if x.strip()]
    except (OSError, ValueError):
        return []
    return [s for s in samples if isinstance(s, dict) and s.get("src") == "engine" and "error" not in s
            and isinstance(s.get("t_ms"), (int, float)) and s["t_ms"] >= 0]


def _engine_rates(table: Table, runs: list[Run], colors) -> tuple[str, str] | None:
    """KV cache usage and generated tokens/s over each config's first repeat (engine telemetry)."""
    panels = []
    for config in table.configs:
        engine = _engine_samples(next(r for r in runs if r.config == config))
        kv = [(s["t_ms"] / 1000.0, 100.0 * s["kv_usage"]) for s in engine if s.get("kv_usage") is not None]
        panels.append({"config": config, "kv": kv, "tok_s": token_rate(engine)})
    if not any(p["kv"] or p["tok_s"] for p in panels):
        return None
    caption = "engine KV cache usage (%, solid) and generated tokens/s (dashed), first repeat, from telemetry"
    return _caption(table, caption), plots.engine_rates(panels, colors)


def token_rate(engine: list[dict]) -> list[tuple[float, float]]:
    """Generated tokens/s between consecutive scrapes, from the generation-token counter;
    a counter that went down (engine restart) gives no point."""
    pts = [(s["t_ms"] / 1000.0, s["generation_tokens"]) for s in engine if s.get("generation_tokens") is not None]
    return [(t1, (g1 - g0) / (t1 - t0)) for (t0, g0), (t1, g1) in zip(pts, pts[1:]) if t1 > t0 and g1 >= g0]


def _engine_lines(run: Run) -> list[tuple[str, list[float], list[float]]]:
    engine = _engine_samples(run)
    out = []
    for name in ("running", "waiting"):
        pts = [(s["t_ms"] / 1000.0, s[name]) for s in engine if s.get(name) is not None]
        if pts:
            out.append((f"engine {name} (repeat {run.repeat or 1})", [p[0] for p in pts], [p[1] for p in pts]))
    return out


def _prompts(runs: list[Run]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for run in runs:
        if run.workload not in out and run.prompts():
            out[run.workload] = [{**p, "prompt": _cut(str(p.get("prompt", "")))} for p in run.prompts()]
    return out


def _cut(text: str) -> str:
    return text if len(text) <= PROMPT_CHARS else text[:PROMPT_CHARS] + f" … [{len(text) - PROMPT_CHARS} more characters]"


def _diagnoses(runs: list[Run]) -> list[dict]:
    """The diagnosis of each config's first run per workload, when the results carry one."""
    out, seen = [], set()
    for run in runs:
        d = run.servelab.get("diagnosis")
        if not isinstance(d, dict) or (run.config, run.workload) in seen:
            continue
        seen.add((run.config, run.workload))
        top = (d.get("verdicts") or [{}])[0]
        out.append({"config": run.config, "workload": run.workload, "verdict": d.get("verdict", top.get("id", "?")),
                    "confidence": top.get("confidence"), "summary": top.get("summary", ""), "next": top.get("next", "")})
    return out
