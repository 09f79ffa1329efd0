"""When each request should be sent: offsets from t0, drawn once before the run.

Rate ``inf`` sends everything at t0. Otherwise gaps come from a gamma
distribution with shape ``burstiness`` and mean ``1/rate`` (burstiness 1 is a
Poisson process; < 1 burstier, > 1 more even). As ``vllm bench serve`` does, the
cumulative offsets are then scaled so the last one lands exactly at ``n/rate``:
different seeds then offer the same average load instead of ±2%.

With a ramp-up (vLLM's ``--ramp-up-strategy``), request i of n is offered at
``start + (end − start)·p`` (linear) or ``start·(end/start)^p`` (exponential),
``p = i / max(n − 1, 1)``; its gap is drawn at that rate, and nothing is rescaled.

Same seed, same schedule as vLLM: vLLM draws the gaps one per request, in order,
from numpy's *legacy* global stream (``np.random.seed(seed)`` then
``np.random.gamma``), so the generator here is a ``RandomState`` seeded the same
way (``arrival_rng``) — a ``Generator`` would give other numbers for the seed.

The schedule is absolute — the pacer sleeps until ``t0 + offset`` — so a late
wake-up delays one request and never shifts the rest.
"""

from __future__ import annotations

import math

import numpy as np

RAMP_UP_STRATEGIES = ("linear", "exponential")


def arrival_rng(seed: int, state: tuple | None = None) -> np.random.RandomState:
    """vLLM's arrival stream for ``seed``; ``state``: where a dataset left that same
    stream (vLLM's prefix_repetition draws its prompts from it before the gaps)."""
    rng = np.random.RandomState(seed)
    if state is not None:
        rng.set_state(state)
    return rng


def arrival_offsets_ns(n: int, rate: float, burstiness: float, rng, ramp_up: tuple[str, float, float] | None = None,
                       ) -> np.ndarray:
    """Offsets (int64 ns from t0) of ``n`` requests offered at ``rate`` req/s.

    ``rng``: anything with numpy's ``gamma(shape, scale)``; ``arrival_rng(seed)``
    for vLLM's numbers. ``ramp_up``: (strategy, start req/s, end req/s), replacing ``rate``.
    """
    if n <= 0:
        return np.zeros(0, dtype=np.int64)
    if burstiness <= 0:
        raise ValueError("burstiness must be positive")
    rates = np.full(n, float(rate)) if ramp_up is None else ramp_rates(n, *ramp_up)
    if np.any(rates <= 0):
        raise ValueError("request rates must be positive")
    gaps = _gaps(rates, burstiness, rng)
    offsets = np.cumsum(gaps)  # sequential, as vLLM's running sum
    if ramp_up is None and offsets[-1] != 0:
        offsets *= (n / rate) / offsets[-1]
    return np.round(offsets * 1e9).astype(np.int64)


def ramp_rates(n: int, strategy: str, start: float, end: float) -> np.ndarray:
    """The rate each of ``n`` requests is offered at, from ``start`` to ``end`` req/s."""
    progress = np.arange(n) / max(n - 1, 1)
    if strategy == "linear":
        return start + (end - start) * progress
    if strategy == "exponential":
        return start * (end / start) ** progress
    raise ValueError(f"ramp-up strategy must be one of {', '.join(RAMP_UP_STRATEGIES)}, got {strategy!r}")


def _gaps(rates: np.ndarray, burstiness: float, rng) -> np.ndarray:
    # Rate inf and burstiness inf draw nothing, in vLLM too: the stream stays where
    # it was for requests that do draw.
    gaps = np.zeros(len(rates))
    finite = ~np.isinf(rates)
    if math.isinf(burstiness):
        gaps[finite] = 1.0 / rates[finite]
    elif finite.any():
        gaps[finite] = rng.gamma(burstiness, 1.0 / (rates[finite] * burstiness))
    return gaps


def trace_offsets_ns(timestamps_s) -> np.ndarray:
    """Offsets of a trace replayed by its own timestamps (seconds from t0), as vLLM
    replays it: requests go in file order, so one stamped earlier than the request
    before it goes right after that one; a stamp ≤ 0 goes at t0."""
    stamps = np.maximum(np.asarray(timestamps_s, dtype=float), 0.0)
    return np.round(np.maximum.accumulate(stamps) * 1e9).astype(np.int64)


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
