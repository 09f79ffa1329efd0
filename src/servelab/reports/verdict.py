"""Is a difference bigger than the noise? One stated rule, applied to every metric.

Rule: config B is *better* (or *worse*) than the baseline A on a metric when
  1. both have at least 2 repeats,
  2. the ranges [min, max] of their repeats do not overlap, and
  3. the means differ by more than ``floor`` (10 % by default) of A's mean —
     twice that for a latency: a P99 over tens of requests rests on the largest
     one or two of each run, and mean/median TTFT under queueing moved 12 % between
     two starts of the same config (throughput 7 %) on a shared 2-core machine;
otherwise the difference is *within noise*. "Better" follows the metric's
direction (throughput: higher; latency: lower).

Why both 2 and 3: with 2 repeats a side, two samples of the *same* config fall
apart with probability 1/3 by chance alone, so non-overlap alone would call
noise a difference every third time. And repeats on one engine start miss the
noise between starts and between moments of a shared machine: the demo's
baseline started twice has come out up to ~5 % apart with each start's own
repeats within ±1 %. The floor, twice that, keeps such differences from being
called real. Numbers an engine reports once (KV cache size)
have no noise: they are the same or not.
"""

from __future__ import annotations

from servelab.metrics.noise import (  # the rule itself, shared with `servelab scale`
    BETTER, NOISE, NOISE_FLOOR, SAME, TAIL_FACTOR, UNKNOWN, WORSE, Spread, verdict,
)

__all__ = ["BETTER", "NOISE", "NOISE_FLOOR", "SAME", "TAIL_FACTOR", "UNKNOWN", "WORSE", "Spread", "verdict",
           "exact_verdict", "ratio", "rule_text"]


def rule_text(floor: float = NOISE_FLOOR) -> str:
    return (f"better/worse = the min–max ranges over repeats do not overlap AND the means differ by more "
            f"than {floor:.0%} for throughputs, {floor * TAIL_FACTOR:.0%} for latencies; otherwise within noise (needs ≥ 2 repeats "
            "per config). ↑ higher is better, ↓ lower is better.")


def exact_verdict(base: float, other: float, higher_is_better: bool) -> str:
    """For a number without noise (the engine's KV size): same, better or worse."""
    if other == base:
        return SAME
    return BETTER if (other > base) == higher_is_better else WORSE


def ratio(base: float, other: float) -> float | None:
    return other / base if base else None
