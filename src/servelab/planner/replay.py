"""Measured runs replayed through the simulator: the observe → replay step of calibrating
on the user's own engine (BLIS's observe → replay → calibrate loop).

A run is replayed as it was sent: each request's prompt length, its output tokens and its
intended send time from the per-request records, the client's concurrency cap from the
result, and the engine's limits from the result's engine section (``--max-num-seqs``,
``--max-num-batched-tokens``, the KV cache and block size it reported) — or the plan's
where the result does not say. What the replay predicts is what ``bench`` reports, with
the same definitions: output tokens ÷ duration (first send to last token), TTFT from a
request's send to its first token, TPOT (last − first token) ÷ (tokens − 1), median over
requests with two tokens or more.

Repeats of one load (same limits, concurrency, rate, request count and prompt lengths)
form a ``Point``; a prediction is judged against the repeats' range (``range_error``):
0 inside [min, max], else its distance to the nearer end, relative to that end — a run
on a shared machine is a range, not a number, and an error smaller than the spread of the
repeats says nothing about the model.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from servelab.engines.spec import flag_value
from servelab.errors import InputError
from servelab.results.runs import Run, load_runs
from servelab.sim.model import EngineLimits, SimRequest, StepModel, blocks_for_tokens
from servelab.sim.simulate import simulate

# result key, label: what a replay predicts and a calibration fits
METRICS = (("output_throughput", "output tok/s"), ("median_tpot_ms", "median TPOT ms"),
           ("mean_ttft_ms", "mean TTFT ms"))


@dataclass(frozen=True, slots=True)
class Observed:
    """One measured run as the simulator replays it."""

    name: str
    point: str  # the load it ran: repeats share it
    requests: tuple[SimRequest, ...]
    max_concurrency: int | None
    limits: EngineLimits
    measured: dict  # METRICS' keys -> the run's figures

    @property
    def batch(self) -> int:
        """Requests that could run at once: the least of the client's cap, the engine's and the requests."""
        return min(self.max_concurrency or len(self.requests), self.limits.max_num_seqs, len(self.requests))

    @property
    def mean_prompt(self) -> float:
        return statistics.fmean(r.prompt_len for r in self.requests)


def observe(run: Run, fallback: EngineLimits) -> Observed:
    """``run`` as a replay; ``fallback``: the limits where its result names none (the plan's)."""
    records = [r for r in run.records() if not r.get("error") and r.get("output_tokens")]
    if not records:
        raise InputError(f"{run.path}: no per-request records with output beside it "
                         "(bench --save-result writes them as <result>.records.jsonl)")
    requests = tuple(SimRequest(round(float(r["intended_send_ms"]) * 1e6), int(r["prompt_len"]),
                                int(r["output_tokens"])) for r in sorted(records, key=lambda r: r["intended_send_ms"]))
    limits = engine_limits(run.engine, fallback)
    conc = run.result.get("max_concurrency")
    rate = run.result.get("request_rate")
    prompt = round(statistics.fmean(r.prompt_len for r in requests))
    point = (f"max_num_seqs {limits.max_num_seqs}, concurrency {conc or '-'}, rate {rate}, "
             f"{len(requests)} requests of {prompt} prompt tokens")
    measured = {key: float(run.result[key]) for key, _ in METRICS if run.result.get(key) is not None}
    if len(measured) < len(METRICS):
        raise InputError(f"{run.path}: the result lacks {', '.join(k for k, _ in METRICS if k not in measured)}")
    return Observed(str(run.path), point, requests, conc, limits, measured)


def engine_limits(engine: dict, fallback: EngineLimits) -> EngineLimits:
    """The scheduler limits a measured engine ran with: its flags and memory report, else ``fallback``'s."""
    args = [str(a) for a in engine.get("args") or []]
    report = engine.get("memory_report") or {}
    block = int(report.get("block_size") or fallback.block_size)
    kv = int(report.get("kv_cache_tokens") or fallback.kv_tokens)
    return replace(fallback, block_size=block, num_blocks=blocks_for_tokens(kv, block),
                   max_num_seqs=int(flag_value(args, "--max-num-seqs") or fallback.max_num_seqs),
                   max_num_batched_tokens=int(flag_value(args, "--max-num-batched-tokens")
                                              or fallback.max_num_batched_tokens))


def load_observed(paths, fallback: EngineLimits, required: bool = True) -> list[Observed]:
    """Every measured result with its per-request records under ``paths`` (simulated ones are
    refused); ``required=False``: [] where there are none (telemetry-only calibration)."""
    try:
        runs = [run for run in load_runs(list(paths)) if run.records()]
    except InputError:
        if required:
            raise
        runs = []
    if not runs and required:
        raise InputError(f"no results with per-request records in {' '.join(map(str, paths))} "
                         "(bench --save-result writes them)")
    simulated = [str(r.path) for r in runs if r.simulated]
    if simulated:
        raise InputError(f"{simulated[0]}: a simulated run; calibrate on measured runs only")
    return [observe(run, fallback) for run in runs]


def replay(run: Observed, model: StepModel) -> dict:
    """The run's METRICS as the simulator predicts them with ``model``."""
    sim = simulate(list(run.requests), run.limits, model, run.max_concurrency)
    served = [e for e in sim.emissions if e.token_ns and not e.error]
    if not served:
        return {key: float("nan") for key, _ in METRICS}
    duration_s = max(e.token_ns[-1] for e in served) / 1e9
    tokens = sum(len(e.token_ns) for e in served)
    tpots = [(e.token_ns[-1] - e.token_ns[0]) / (len(e.token_ns) - 1) / 1e6 for e in served if len(e.token_ns) > 1]
    return {"output_throughput": tokens / duration_s if duration_s > 0 else float("nan"),
            "median_tpot_ms": statistics.median(tpots) if tpots else float("nan"),
            "mean_ttft_ms": statistics.fmean((e.token_ns[0] - e.sent_ns) / 1e6 for e in served)}


@dataclass(frozen=True, slots=True)
class Point:
    """The repeats of one load, and what they measured (each metric: one value per repeat)."""

    point: str
    runs: tuple[Observed, ...]

    @property
    def batch(self) -> int:
        return self.runs[0].batch

    def values(self, key: str) -> list[float]:
        return [r.measured[key] for r in self.runs]

    def mean(self, key: str) -> float:
        return statistics.fmean(self.values(key))


def points(runs: list[Observed]) -> list[Point]:
    """Runs grouped by the load they ran, in the order first seen."""
    grouped: dict[str, list[Observed]] = {}
    for run in runs:
        grouped.setdefault(run.point, []).append(run)
    return [Point(key, tuple(group)) for key, group in grouped.items()]


def range_error(predicted: float, values: list[float]) -> float:
    """0 when ``predicted`` lies within the repeats' [min, max]; else (predicted − nearer end) ÷ that end."""
    low, high = min(values), max(values)
    if predicted > high:
        return (predicted - high) / high
    if predicted < low:
        return (predicted - low) / low
    return 0.0
