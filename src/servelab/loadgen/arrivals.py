"""When each request should be sent: offsets from t0, drawn once before the run.

Rate ``inf`` sends everything at t0. Otherwise gaps come from a gamma
distribution with shape ``burstiness`` and mean ``1/rate`` (burstiness 1 is a
Poisson process; < 1 burstier, > 1 more even). As ``vllm bench serve`` does, the
cumulative offsets are then scaled so the last one lands exactly at ``n/rate``:
different seeds then offer the same average load instead of ±2%.

The schedule is absolute — the pacer sleeps until ``t0 + offset`` — so a late
wake-up delays one request and never shifts the rest.
"""

from __future__ import annotations

import math

import numpy as np


def arrival_offsets_ns(n: int, rate: float, burstiness: float, rng: np.random.Generator) -> np.ndarray:
    """Offsets (int64 ns from t0) of ``n`` requests offered at ``rate`` req/s."""
    if n <= 0:
        return np.zeros(0, dtype=np.int64)
    if math.isinf(rate):
        return np.zeros(n, dtype=np.int64)
    if rate <= 0 or burstiness <= 0:
        raise ValueError("rate and burstiness must be positive")
    if math.isinf(burstiness):
        gaps = np.full(n, 1.0 / rate)
    else:
        gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=n)
    offsets = np.cumsum(gaps)
    offsets *= (n / rate) / offsets[-1]
    return np.round(offsets * 1e9).astype(np.int64)


def ramp_rates(n: int, strategy: str, start_rps: float, end_rps: float) -> np.ndarray:
    """Each request's rate on a ramp, by its index i, as ``vllm bench serve`` defines it:
    progress p = i / max(n − 1, 1); linear: start + (end − start)·p; exponential:
    start · (end / start)^p. The first request gets ``start``, the last ``end``."""
    progress = np.arange(n) / max(n - 1, 1)
    if strategy == "linear":
        return start_rps + (end_rps - start_rps) * progress
    if strategy == "exponential":
        return start_rps * (end_rps / start_rps) ** progress
    raise ValueError(f"unknown ramp-up strategy {strategy!r}")


def ramp_offsets_ns(rates: np.ndarray, burstiness: float, rng) -> np.ndarray:
    """Offsets for per-request ``rates``: gap i is gamma(shape=burstiness, mean=1/rate_i),
    drawn in request order. Not rescaled to n/rate as a fixed rate is (vLLM rescales only
    without a ramp): a ramp has no single target duration."""
    if len(rates) == 0:
        return np.zeros(0, dtype=np.int64)
    if math.isinf(burstiness):
        gaps = 1.0 / rates
    else:
        gaps = rng.gamma(shape=burstiness, scale=1.0 / (rates * burstiness))
    return np.round(np.cumsum(gaps) * 1e9).astype(np.int64)


def rate_steps(rates: np.ndarray, start_rps: float) -> list[tuple[int, int]]:
    """vLLM's ``rps_change_events`` as (whole rps, index of the request that reached it):
    the start's whole rate at request 0, then each whole value the ramp passes, at the
    first request whose rate reaches it (several values at once when the ramp jumps)."""
    last = int(start_rps)
    steps = [(last, 0)]
    for i, rate in enumerate(rates):
        now = int(rate)
        steps += [(v, i) for v in range(last + 1, now + 1)]
        last = max(last, now)
    return steps
