"""Energy and cost per token: the arithmetic, on numbers already read.

Energy over a span comes from a cumulative series E(t) in joules, known at sample
instants and linear between them. Where the GPU has NVML's total-energy counter
(``nvmlDeviceGetTotalEnergyConsumption``, mJ since the driver loaded; Volta and later)
E is that counter; where it does not, E is the power samples integrated by the
trapezoid rule (the board's power reading is itself an average over a short period,
so this is an estimate — the source is named beside every figure). Energy over
[a, b] is E(b) − E(a); a span reaching outside the samples has no figure.

Cost counts GPU-hours as the number of GPUs × the wall time of the span (the run, or
its steady window), priced at the user's $ per GPU-hour:

    cost per 1M tokens = $/GPU-h × GPUs × seconds / 3600 / tokens × 1e6
"""

from __future__ import annotations

import numpy as np

COUNTER = "NVML total-energy counter"
POWER = "power samples integrated (trapezoid)"


def cumulative_j(t_s: list[float], energy_j: list[float | None], power_w: list[float | None]):
    """(instants, E at each, source) for one GPU: its counter where every sample has it, else its
    power integrated over the samples that have it; None with fewer than two usable samples."""
    if len(t_s) >= 2 and all(e is not None for e in energy_j):
        return np.asarray(t_s, float), np.asarray(energy_j, float), COUNTER
    have = [(t, p) for t, p in zip(t_s, power_w) if p is not None]
    if len(have) < 2:
        return None
    t, p = np.asarray([x[0] for x in have], float), np.asarray([x[1] for x in have], float)
    steps = (p[1:] + p[:-1]) / 2 * np.diff(t)
    return t, np.concatenate([[0.0], np.cumsum(steps)]), POWER


def joules_between(series, a_s: float, b_s: float) -> float | None:
    """E(b) − E(a), linear between samples; None when [a, b] reaches outside them."""
    if series is None:
        return None
    t, e, _ = series
    if a_s < t[0] or b_s > t[-1] or b_s < a_s:
        return None
    return float(np.interp(b_s, t, e) - np.interp(a_s, t, e))


def per_token(joules: float | None, seconds: float, output_tokens: int) -> dict | None:
    """Joules, average power, J per output token and output tokens per joule over one span."""
    if joules is None or seconds <= 0:
        return None
    return {"joules": joules, "avg_power_w": joules / seconds,
            "j_per_output_token": joules / output_tokens if output_tokens else None,
            "output_tokens_per_j": output_tokens / joules if joules > 0 else None}


def cost(dollars_per_gpu_hour: float, gpus: int, seconds: float, output_tokens: int, total_tokens: int) -> dict:
    """What the span's GPU-hours cost, and per million output and total tokens (module docstring)."""
    gpu_hours = gpus * seconds / 3600
    dollars = dollars_per_gpu_hour * gpu_hours
    return {"gpu_hours": gpu_hours, "dollars": dollars,
            "per_million_output_tokens": dollars / output_tokens * 1e6 if output_tokens else None,
            "per_million_total_tokens": dollars / total_tokens * 1e6 if total_tokens else None}
