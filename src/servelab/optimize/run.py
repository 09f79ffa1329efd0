"""The command's library side: from a plan to a finished (or resumed) optimization — the
check before launching, the measurer for the engine kind, the pre-ranker when asked —
and the text the command prints. ``cli/optimize.py`` only parses and prints.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from servelab.engines.vllm import vllm_build
from servelab.optimize.loop import optimize, previous
from servelab.optimize.measure import EngineMeasurer, SimMeasurer
from servelab.optimize.plan import OptimizePlan, check, own_flags, plan_check
from servelab.optimize.prerank import Prerank
from servelab.optimize.report import write_report
from servelab.telemetry.gpu import gpu_devices
from servelab.results.layout import OPTIMIZE_FILE
from servelab.study.entries import EngineEntry


def table_kind(entry: EngineEntry) -> str:
    """The knob table an engine reads: the embedded engine and a CPU build are vLLM's CPU build."""
    kind = entry.spec.kind
    if kind == "embedded" or (kind == "vllm" and vllm_build() == "cpu"):
        return "vllm-cpu"
    return kind


def with_engine_gpu(plan: OptimizePlan) -> OptimizePlan:
    """A vLLM engine's plan with the GPU it serves from: its batch defaults follow it (config.engine_defaults)."""
    if plan.kind != "vllm" or plan.device is not None:
        return plan
    return dataclasses.replace(plan, device=serving_gpu())


def serving_gpu() -> tuple[str, float | None] | None:
    """The first GPU NVML sees (name, GiB), where a vLLM engine started here serves; None without one."""
    return next(((d["name"], d.get("memory_total_gib")) for d in gpu_devices()), None)


def optimize_command(plan: OptimizePlan, say) -> tuple[dict, Path]:
    check(plan)
    plan = own_flags(plan)
    previous(plan)  # another optimization under this --name: refused before anything is written
    if not plan.fast:
        plan = dataclasses.replace(plan, plan_check=plan_check(plan.engine, plan.port))
        if plan.plan_check:
            say(f"plan: {plan.plan_check['line']}")
    plan = with_engine_gpu(plan)
    measurer = _measurer(plan, say)
    prerank = None
    if plan.simulate_first:
        prerank = Prerank(SimMeasurer(plan.name + "/presim", plan.results, plan.engine, plan.spec, plan.slo))
    try:
        record = optimize(plan, measurer, say, prerank)
    finally:
        _write_up(plan.folder, say)
    return record, plan.folder / OPTIMIZE_FILE


def _write_up(folder: Path, say) -> None:
    """The note from the record as it stands: at the end, and after Ctrl-C or an error (the
    report so far: it says what was not reached)."""
    if (folder / OPTIMIZE_FILE).is_file():
        html, md = write_report(folder)
        say(f"report: {html} and {md}")


def _measurer(plan: OptimizePlan, say):
    if plan.fast:
        return SimMeasurer(plan.name, plan.results, plan.engine, plan.spec, plan.slo)
    return EngineMeasurer(plan.name, plan.results, plan.engine, plan.spec, plan.slo, say, warmup=plan.warmup,
                          port=plan.port, verbose=plan.verbose)


def text(record: dict, path: Path) -> str:
    """What a person reads at the end: each step in a line, the answer, where the rest is."""
    lines = [f"servelab optimize {record['name']}: {record['objective']['kind']} ({record['objective']['why']})"]
    if record["engine"].get("simulated"):
        lines.insert(0, "SIMULATED: servelab's vLLM V1 scheduler model; these numbers are not measured")
    if record.get("plan_check"):
        lines.append(f"  plan: {record['plan_check']['line']}")
    base = record["baseline"]
    if base:
        lines.append(f"  baseline: {_result(base)}; verdict {base['verdict']}")
    for step in record["steps"]:
        mark = "sim " if step.get("simulated") else ""
        lines.append(f"  {mark}step {step['n']} [{step['verdict']}] {step['why']}")
    lines.append(f"stopped: {record['stopped_because']}")
    final = record.get("final")
    if final:
        client = final["client"]
        lines += [f"best: {final['output_tok_s']:.1f} out tok/s", f"  serve: {final['serve_command']}",
                  f"  client: --max-concurrency {client['max_concurrency']}, --workers {client['workers'] or 1}"]
    op = record.get("operating_point")
    if op and op.get("load") is not None:
        lines.append(f"operating point: concurrency {op['load']:g}, {op['output_tok_s']:.1f} out tok/s ({op['why']})")
    if record.get("next"):
        lines.append(f"next: {record['next']['scale_command']}")
    b = record["budget"]
    lines.append(f"budget: {b['runs_used']} runs (limit {b['runs_limit']}), {b['engine_starts']} engine starts, "
                 f"{b['simulated_runs']} simulated runs, {b['minutes_used']:.1f} min")
    lines.append(f"summary: {path}")
    return "\n".join(lines)


def _result(step: dict) -> str:
    r = step["result"]
    return f"{r['output_tok_s']:.1f} out tok/s, mean TTFT {r['mean_ttft_ms']:.0f} ms ({r['repeats']} runs)"
