"""Fit the step-time model to measured runs' engine telemetry.

Between two engine samples the engine spent dt seconds on some steps, producing Δgen
output tokens and prefilling Δprompt prompt tokens. With ``StepModel``

    dt = steps × (overhead + weight_read) + Δgen × (per_seq + per_token) + Δprompt × per_token

(a decode step computes one token per running sequence). Steps are llama.cpp's
``n_decode`` counter where the engine has one, else Δgen / mean running (one token per
running request per step). Least squares on the loaded intervals gives the three
coefficients; the weight read cannot be told apart from the per-step overhead by timing
alone, so it is taken from the roofline (bytes ÷ bandwidth) and the overhead is the rest.
The fit error is |Σ predicted − Σ measured busy time| ÷ measured, over the runs given.
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.errors import InputError
from servelab.planner.speed import StepModel


@dataclass(frozen=True, slots=True)
class Interval:
    dt_s: float
    steps: float
    generated: float
    prompt: float


def intervals(engine_samples: list[dict]) -> list[Interval]:
    """Loaded intervals (requests running at both ends, tokens produced) from one run's samples."""
    out = []
    for a, b in zip(engine_samples, engine_samples[1:]):
        gen = _delta(a, b, "generation_tokens")
        running = ((a.get("running") or 0) + (b.get("running") or 0)) / 2
        if gen <= 0 or running < 1 or min(a.get("running") or 0, b.get("running") or 0) < 1:
            continue
        steps = _delta(a, b, "decode_calls") if "decode_calls" in b else gen / running
        out.append(Interval((b["t_ms"] - a["t_ms"]) / 1000, steps, gen, _delta(a, b, "prompt_tokens")))
    return out


def _delta(a: dict, b: dict, name: str) -> float:
    return max(0.0, float(b.get(name) or 0) - float(a.get(name) or 0))


def fit(data: list[Interval], weight_read_s: float) -> StepModel:
    import numpy as np

    if len(data) < 3:
        raise InputError(f"calibration needs at least 3 loaded telemetry intervals, got {len(data)}: "
                         "pass runs recorded with telemetry (the default) under load")
    x = np.array([[i.steps, i.generated, i.prompt] for i in data])
    y = np.array([i.dt_s for i in data])
    per_step, per_generated, per_prompt = _nonnegative_least_squares(x, y)
    return StepModel(overhead_s=float(per_step) - weight_read_s, per_seq_s=float(per_generated - per_prompt),
                     per_token_s=float(per_prompt), weight_read_s=weight_read_s)


def _nonnegative_least_squares(x, y) -> list[float]:
    """Least squares with every cost ≥ 0: a time cannot be negative, and noisy runs on a shared
    machine would otherwise trade a negative cost for a larger one. Three unknowns: try every
    subset of them and keep the best fit whose costs are all ≥ 0."""
    import itertools

    import numpy as np

    best, best_residual = [0.0] * x.shape[1], float(np.sum(y ** 2))
    for size in range(1, x.shape[1] + 1):
        for cols in itertools.combinations(range(x.shape[1]), size):
            coef, *_ = np.linalg.lstsq(x[:, cols], y, rcond=None)
            residual = float(np.sum((x[:, cols] @ coef - y) ** 2))
            if (coef >= 0).all() and residual < best_residual:
                best, best_residual = [0.0] * x.shape[1], residual
                for col, value in zip(cols, coef):
                    best[col] = float(value)
    return best


def predicted_s(model: StepModel, data: list[Interval]) -> float:
    per_step = model.overhead_s + model.weight_read_s
    return sum(i.steps * per_step + i.generated * (model.per_seq_s + model.per_token_s)
               + i.prompt * model.per_token_s for i in data)


def error(model: StepModel, data: list[Interval]) -> float:
    """(predicted − measured) ÷ measured busy time over ``data``."""
    measured = sum(i.dt_s for i in data)
    return (predicted_s(model, data) - measured) / measured if measured else 0.0
