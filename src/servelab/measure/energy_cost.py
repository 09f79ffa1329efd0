"""The result's ``energy`` section and its console lines: joules the GPUs drew over the run
and over its steady window, per output token, and — with ``--gpu-hour-cost`` — what the
GPU-hours cost per million tokens (arithmetic and its rules: metrics/energy.py).

The joules come from the run's telemetry timeline (the scraper samples NVML beside the
engine's /metrics), so ``--no-telemetry`` measures none; a machine without a GPU says so
in one line, never with zeros. GPUs counted: the engine's, among those NVML sees on this machine
(the engine's host, when it is local): those holding over 10 % of their memory (vLLM reserves
most of it), else those that computed while requests were in flight, and beside them any GPU whose
memory and utilization NVML does not read (``telemetry.summary.engine_gpus``). A CPU engine, a
mock or a remote server beside an idle GPU draws none of its power: "no GPU the engine used",
never the idle GPU's joules.
"""

from __future__ import annotations

from servelab.metrics.energy import cost, per_token
from servelab.metrics.summary import Summary
from servelab.telemetry.gpu import gpu_devices
from servelab.telemetry.summary import engine_gpus, gpu_energy

GPU_HOURS_RULE = ("GPU-hours = the engine's GPUs (those NVML sees holding its memory or computing, and any it "
                  "cannot read) × wall time of the span (the run; the steady window)")


def energy_section(timeline, summary: Summary, steady: dict, gpu_hour_cost: float | None,
                   simulated: bool) -> dict:
    """Joules and cost over the run and its steady window, or why there are none."""
    used, why, nvml = _gpus(timeline, gpu_hour_cost, simulated)
    gpus = len(used)
    section = {"gpu_hour_cost": gpu_hour_cost, "gpu_hours_rule": GPU_HOURS_RULE}
    if not gpus:
        return {**section, "gpus": 0, "why": why, "nvml": nvml, "run": None, "steady_state": None, "cost": None}
    duration = summary.duration_s if summary.duration_s == summary.duration_s else 0.0
    spans = {"run": (0.0, duration, summary.total_output, summary.total_input + summary.total_output)}
    if steady["plateau"]:
        spans["steady_state"] = (steady["start_s"], steady["end_s"], steady["output_tokens"],
                                 steady["output_tokens"] + steady["prompt_tokens"])
    out = {**section, "gpus": gpus, "why": why, "source": None, "run": None, "steady_state": None, "cost": None}
    for name, (a, b, tokens, _) in spans.items():
        joules, source = gpu_energy(timeline, used, a * 1000, b * 1000) if timeline is not None else (None, None)
        out[name], out["source"] = per_token(joules, b - a, tokens), source or out["source"]
    if gpu_hour_cost is not None:
        out["cost"] = {name: cost(gpu_hour_cost, gpus, b - a, tokens, total)
                       for name, (a, b, tokens, total) in spans.items()}
    return out


def _gpus(timeline, gpu_hour_cost: float | None, simulated: bool) -> tuple[list[int], str | None, str | None]:
    """The GPUs counted (indices), why there are no joules (None: there are), and what NVML said
    when it saw none."""
    if simulated:
        return [], "simulated run: no GPU drew power", None
    if timeline is None:
        seen = [d["index"] for d in gpu_devices()] if gpu_hour_cost is not None else []
        why = "not measured (--no-telemetry: NVML is sampled with the telemetry)"
        if seen:
            why += "; cost counts every GPU NVML sees: without telemetry the engine's cannot be told"
        return seen, why, None
    head = timeline.header.get("gpu") or {}
    if head.get("status") != "ok":
        return [], "no GPU (NVML saw none; the result's energy.nvml says why)", head.get("detail")
    used, why = engine_gpus(timeline)
    if not used:
        return [], f"no GPU the engine used ({why})", None
    return used, None, None


def lines(section: dict) -> list[str]:
    """servelab's console lines: one when there is no GPU, else energy, then cost when priced."""
    if not section["gpus"]:
        if section["gpu_hour_cost"] is None:
            return [f"servelab: energy and cost: {section['why']} — no joules or cost per token"]
        said = f" (NVML: {section['nvml']})" if section.get("nvml") else ""
        return [f"servelab: energy and cost: {section['why']} — no joules, and --gpu-hour-cost "
                f"{section['gpu_hour_cost']:g} prices no GPU-hour{said}"]
    out = []
    if section["run"] is not None:
        out.append(f"servelab: energy ({section['source']}, {section['gpus']} GPU): "
                   + "; ".join(_energy(name, section[name]) for name in ("run", "steady_state") if section[name]))
    elif section["why"]:
        out.append(f"servelab: energy: {section['why']}")
    if section["cost"]:
        priced = "; ".join(_cost(name, c) for name, c in section["cost"].items())
        out.append(f"servelab: cost at ${section['gpu_hour_cost']:g}/GPU-hour × {section['gpus']} GPU "
                   f"({GPU_HOURS_RULE}): {priced}")
    return out


def _energy(name: str, e: dict) -> str:
    per = f"{e['j_per_output_token']:.4g} J/output token, {e['output_tokens_per_j']:.4g} tokens/J" \
        if e["j_per_output_token"] else "no output tokens"
    return f"{name.replace('_', ' ')} {e['joules']:.1f} J, {e['avg_power_w']:.1f} W average, {per}"


def _cost(name: str, c: dict) -> str:
    def money(x):
        return "-" if x is None else f"${x:.4g}"

    return (f"{name.replace('_', ' ')} {money(c['per_million_output_tokens'])} per 1M output tokens, "
            f"{money(c['per_million_total_tokens'])} per 1M total")
