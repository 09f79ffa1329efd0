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

A straight line through loads 2–8 can still miss batch 1 by 2× (37 ms fitted where the
runs measured 19 ms), so TPOT at a batch is read from the runs where they measured it:
the step time at a load seen (Σ dt ÷ Σ steps of the intervals whose mean running rounds
to it), linear between two loads seen, and outside them the nearest load seen plus the
model's change from there (anchored), flagged by one note. A calibration also carries
the runs' context length (the engine's "Maximum concurrency for N tokens per request",
else its ``--max-model-len``), so the plan beside it is for what ran.

Busy time is not what a user reads. ``calibrate_replay`` fits the simulator itself:
the step costs (overhead, per sequence, per token) for which replaying the runs
(``planner.replay``: same requests, same concurrency, same engine limits) gives back
their output throughput, median TPOT and mean TTFT — the mean over fitted loads of
Σ log(replayed ÷ measured)², minimized by Nelder–Mead from the telemetry fit (or the
roofline). Runs held out are replayed with the result and judged against their repeats'
range; a held-out load outside the batches or prompt lengths fitted is said to be
extrapolated.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

from servelab.engines.spec import flag_value
from servelab.errors import InputError
from servelab.planner.replay import METRICS, Observed, Point, points, range_error, replay
from servelab.planner.speed import StepModel
from servelab.results.runs import Run, read_result
from servelab.sim.model import StepModel as SimStep
from servelab.telemetry.timeline import read

TIMELINE = ".timeline.jsonl"  # beside the result it belongs to: result.json ↔ result.timeline.jsonl
BATCHES = (1, 8, 32)  # the TPOTs a calibration reports


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
    per_step, per_generated, per_prompt = nonnegative_least_squares(x, y)
    return StepModel(overhead_s=float(per_step) - weight_read_s, per_seq_s=float(per_generated - per_prompt),
                     per_token_s=float(per_prompt), weight_read_s=weight_read_s)


def nonnegative_least_squares(columns, target, weights=None):
    """x >= 0 minimising ||W (A x - b)|| (A: rows x k columns, k small; W: ``weights``, 1 by default).
    A cost or an efficiency cannot be negative, and noisy runs on a shared machine would otherwise
    trade a negative term for a larger one; clipping an unconstrained fit would not give the best
    non-negative one. With two or three unknowns every subset of the columns is a tiny solve: try
    each and keep the best fit whose terms are all >= 0 (the offline fit, ``corpus.fit``, uses it too)."""
    import itertools

    import numpy as np

    w = np.ones(len(target)) if weights is None else weights
    a, b = columns * w[:, None], target * w
    best, best_cost = np.zeros(columns.shape[1]), float(np.sum(b * b))
    for size in range(1, columns.shape[1] + 1):
        for subset in itertools.combinations(range(columns.shape[1]), size):
            x_sub = np.linalg.lstsq(a[:, subset], b, rcond=None)[0]
            if np.all(x_sub >= 0):
                x = np.zeros(columns.shape[1])
                x[list(subset)] = x_sub
                cost = float(np.sum((a @ x - b) ** 2))
                if cost < best_cost:
                    best, best_cost = x, cost
    return best


def predicted_s(model: StepModel, data: list[Interval]) -> float:
    per_step = model.overhead_s + model.weight_read_s
    return sum(i.steps * per_step + i.generated * (model.per_seq_s + model.per_token_s)
               + i.prompt * model.per_token_s for i in data)


def error(model: StepModel, data: list[Interval]) -> float:
    """(predicted − measured) ÷ measured busy time over ``data``."""
    measured = sum(i.dt_s for i in data)
    return (predicted_s(model, data) - measured) / measured if measured else 0.0


@dataclass(frozen=True, slots=True)
class CalibrationRun:
    """One run's loaded intervals, and the context length its engine served (None: unknown)."""

    timeline: Path
    intervals: list[Interval]
    max_model_len: int | None


def load_runs(paths: list[Path], required: bool = True) -> list[CalibrationRun]:
    """Every ``*.timeline.jsonl`` given or under the folders given, in order ([] when none
    and not ``required``: a calibration by replay needs no telemetry)."""
    found = [p for path in paths for p in _timelines(path)]
    if not found and not required:
        return []
    if not found:
        raise InputError(f"no telemetry (*{TIMELINE}) under {' '.join(map(str, paths))}")
    return [CalibrationRun(p, intervals(read(p).during("engine")), _served_length(p)) for p in found]


def _timelines(path: Path) -> list[Path]:
    """A timeline given, the one beside a result given (r.json ↔ r.timeline.jsonl), or those under a folder."""
    if not path.is_file():
        return sorted(path.rglob(f"*{TIMELINE}"))
    if path.name.endswith(TIMELINE):
        return [path]
    beside = path.with_name(path.name.removesuffix(".json") + TIMELINE)
    return [beside] if beside.is_file() else []


def _served_length(timeline: Path) -> int | None:
    result = timeline.with_name(timeline.name.removesuffix(TIMELINE) + ".json")
    if not result.is_file():
        return None
    engine = Run(read_result(result), result, result.stem).engine
    said = (engine.get("memory_report") or {}).get("max_concurrency_tokens")
    flag = flag_value([str(a) for a in engine.get("args") or []], "--max-model-len")
    return int(said or flag) if (said or flag) else None


def runs_max_model_len(runs: list[CalibrationRun]) -> int | None:
    """The longest context the runs served (they usually agree); None when no run says."""
    known = [r.max_model_len for r in runs if r.max_model_len]
    return max(known) if known else None


@dataclass(frozen=True, slots=True)
class Tpot:
    batch: int
    seconds: float
    how: str  # "measured", "interpolated" (between two loads measured), "extrapolated" (outside them)


@dataclass(frozen=True, slots=True)
class Calibration:
    runs: tuple[str, ...]
    intervals: int
    model: StepModel
    fit_error: float
    held_out: str | None
    held_out_error: float | None
    loads: tuple[tuple[int, float], ...]  # (running, measured step seconds), by running
    tpot: tuple[Tpot, ...]

    def to_dict(self) -> dict:
        out = asdict(self)
        out["step_model"] = out.pop("model")
        return out

    def note(self) -> str | None:
        """One line when a TPOT reported lies outside the loads the runs measured."""
        outside = [t.batch for t in self.tpot if t.how == "extrapolated"]
        if not outside:
            return None
        seen = "none" if not self.loads else f"{self.loads[0][0]}–{self.loads[-1][0]}" \
            if len(self.loads) > 1 else f"{self.loads[0][0]}"
        return (f"TPOT at batch {', '.join(map(str, outside))}: outside the loads the runs measured ({seen} "
                "running), extrapolated from the nearest along the fitted model")


def calibrate(runs: list[CalibrationRun], weight_read_s: float) -> Calibration:
    """The step model fitted to all runs, its error on them, and on the last run held out."""
    every = [i for run in runs for i in run.intervals]
    model = fit(every, weight_read_s)
    held_out = None
    if len(runs) > 1:
        held_out = error(fit([i for run in runs[:-1] for i in run.intervals], weight_read_s), runs[-1].intervals)
    loads = measured_loads(every)
    return Calibration(tuple(str(r.timeline) for r in runs), len(every), model, error(model, every),
                       str(runs[-1].timeline) if held_out is not None else None, held_out, loads,
                       tuple(tpot_at(model, loads, b) for b in BATCHES))


def measured_loads(data: list[Interval]) -> tuple[tuple[int, float], ...]:
    """(running, Σ dt ÷ Σ steps) for each load seen; running = generated ÷ steps, rounded."""
    sums: dict[int, list[float]] = {}
    for i in data:
        if i.steps > 0:
            total = sums.setdefault(max(1, round(i.generated / i.steps)), [0.0, 0.0])
            total[0], total[1] = total[0] + i.dt_s, total[1] + i.steps
    return tuple((running, dt / steps) for running, (dt, steps) in sorted(sums.items()))


def tpot_at(model: StepModel, loads: tuple[tuple[int, float], ...], batch: int) -> Tpot:
    """The measured step time at ``batch``, linear between two loads measured, or anchored
    to the nearest one outside them (that load's time + the model's change from it)."""
    seen = dict(loads)
    if not seen:  # no interval with a step in it: the model alone
        return Tpot(batch, model.step_s(batch, batch), "extrapolated")
    if batch in seen:
        return Tpot(batch, seen[batch], "measured")
    below = [x for x in seen if x < batch]
    above = [x for x in seen if x > batch]
    if below and above:
        a, b = max(below), min(above)
        return Tpot(batch, seen[a] + (seen[b] - seen[a]) * (batch - a) / (b - a), "interpolated")
    edge = max(below) if below else min(above)
    anchored = seen[edge] + model.step_s(batch, batch) - model.step_s(edge, edge)
    return Tpot(batch, anchored if anchored > 0 else model.step_s(batch, batch), "extrapolated")


# The replay calibration: the simulator's own step costs, fitted so that replaying the runs
# gives back what they measured (planner.replay) — the end-to-end figures a user reads,
# where the telemetry fit above matches busy time only.
FLOOR_STEP_MS = (1.0, 0.1, 0.01)  # the search's smallest first move per cost: overhead, per seq, per token


@dataclass(frozen=True, slots=True)
class Replayed:
    """A fit by replay: the step model, the points fitted and held out, each point's prediction."""

    model: SimStep
    fitted: tuple[Point, ...]
    held_out: tuple[Point, ...]
    predicted: dict  # point name -> METRICS' keys -> predicted value
    loss: float

    def error(self, point: Point, key: str) -> float:
        return range_error(self.predicted[point.point][key], point.values(key))

    def warnings(self) -> list[str]:
        """One line per held-out point whose load lies outside the loads fitted."""
        batches = [p.batch for p in self.fitted]
        prompts = [p.runs[0].mean_prompt for p in self.fitted]
        out = []
        for p in self.held_out:
            outside = [] if min(batches) <= p.batch <= max(batches) else \
                [f"batch {p.batch} outside the batches fitted ({min(batches)}–{max(batches)})"]
            prompt = p.runs[0].mean_prompt
            if not min(prompts) * 0.8 <= prompt <= max(prompts) * 1.25:
                outside.append(f"prompts of {prompt:.0f} tokens outside those fitted "
                               f"({min(prompts):.0f}–{max(prompts):.0f})")
            if outside:
                out.append(f"{p.point}: extrapolated: {'; '.join(outside)}")
        return out


def calibrate_replay(fit_runs: list[Observed], held_runs: list[Observed], start: SimStep,
                     iterations: int = 150) -> Replayed:
    """Step costs (overhead, per sequence, per token; ms, ≥ 0) that minimize the mean over
    fitted points of Σ log(replayed ÷ measured mean)² over METRICS, from ``start``."""
    fitted, held = tuple(points(fit_runs)), tuple(points(held_runs))
    if not fitted:
        raise InputError("calibration by replay needs at least one measured run to fit")

    def loss(ms: list[float]) -> float:
        if min(ms) < 0 or sum(ms) <= 0:
            return 1e9
        model = _sim_step(ms, start.source, start.request_s)
        return statistics.fmean(_log_error(replay(p.runs[0], model), p) for p in fitted)

    # the searched model adds its costs (no separate weight read): the start's read, one token's routed
    # experts with it, folds into its overhead
    read = start.read_s + start.expert_read_s * start.active_experts
    x0 = [(start.overhead_s + read) * 1e3, start.per_seq_s * 1e3, (start.per_token_s + start.expert_token_s) * 1e3]
    best, value = nelder_mead(loss, x0, [max(x * 0.5, f) for x, f in zip(x0, FLOOR_STEP_MS)], iterations)
    model = _sim_step(best, f"replay calibration on {sum(len(p.runs) for p in fitted)} measured runs", start.request_s)
    predicted = {p.point: replay(p.runs[0], model) for p in fitted + held}
    return Replayed(model, fitted, held, predicted, value)


def _sim_step(ms: list[float], source: str, request_s: float) -> SimStep:
    """The step costs searched (ms), with the start's per-request cost kept as it was (the API
    server's delay before the engine: not one of the costs the replay fits)."""
    return SimStep(overhead_s=ms[0] / 1e3, per_seq_s=ms[1] / 1e3, per_token_s=ms[2] / 1e3, per_kv_token_s=0.0,
                   floor_s=0.0, request_s=request_s, source=source)


def _log_error(predicted: dict, point: Point) -> float:
    import math

    total = 0.0
    for key, _ in METRICS:
        value = predicted[key]
        total += math.log(value / point.mean(key)) ** 2 if value > 0 and math.isfinite(value) else 1e3
    return total


def nelder_mead(f, x0: list[float], step: list[float], iterations: int) -> tuple[list[float], float]:
    """A plain Nelder–Mead (no scipy dependency): reflect, expand, contract, shrink. Enough for
    three smooth costs; ``f`` returns a large value outside the feasible region."""
    pts = [list(x0)] + [[x + (step[i] if i == j else 0) for j, x in enumerate(x0)] for i in range(len(x0))]
    vals = [f(p) for p in pts]
    for _ in range(iterations):
        order = sorted(range(len(pts)), key=vals.__getitem__)
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        centroid = [sum(p[j] for p in pts[:-1]) / (len(pts) - 1) for j in range(len(x0))]
        reflected = [c + (c - w) for c, w in zip(centroid, pts[-1])]
        fr = f(reflected)
        if fr < vals[0]:
            expanded = [c + 2 * (c - w) for c, w in zip(centroid, pts[-1])]
            fe = f(expanded)
            pts[-1], vals[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = reflected, fr
        else:
            contracted = [c + 0.5 * (w - c) for c, w in zip(centroid, pts[-1])]
            fc = f(contracted)
            if fc < vals[-1]:
                pts[-1], vals[-1] = contracted, fc
            else:
                pts = [pts[0]] + [[b + 0.5 * (p - b) for b, p in zip(pts[0], q)] for q in pts[1:]]
                vals = [vals[0]] + [f(p) for p in pts[1:]]
    best = min(range(len(pts)), key=vals.__getitem__)
    return pts[best], vals[best]
