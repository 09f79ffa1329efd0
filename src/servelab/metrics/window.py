"""The common window of N replicas loaded at one instant, and what each delivered in it.

Throughput over a whole run mixes three phases: the ramp-up (requests sent, nothing
back yet), the steady state, and the drain (the last requests finishing with nothing
behind them). Replicas ramp up and drain at different moments, so a sum of whole-run
rates would add one replica's drain to another's steady state. Instead, per replica
``r``, from its own records (all ``perf_counter_ns``, one clock on one machine):

    first_done(r)  = the earliest last-token arrival of a successful request
    ramp_end(r)    = max(first_done(r), the latest first token of the requests sent
                         at or before first_done(r))
                     — every request of the opening burst is streaming and one has
                     finished: from here requests leave as others arrive (open loop)
                     or replace them (closed loop)
    drain_start(r) = the latest send of any request to r — from here nothing replaces
                     a request that finishes, so in-flight can only fall

    window = [max_r ramp_end(r), min_r drain_start(r))

In the window, a replica's output tokens are those whose streamed event arrived inside
it (an event carrying k tokens counts k), so a request straddling an edge is split,
not dropped; its requests are those whose last token arrived inside it. Rates are
those counts over the window's length. Failed requests count in neither (as in every
throughput of ``vllm bench serve``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from servelab.metrics.summary import NS_PER_MS, stat
from servelab.records import RequestRecord

NS_PER_S = 1_000_000_000


@dataclass(frozen=True, slots=True)
class Edges:
    """One replica's steady stretch: from its ramp-up's end to its drain's start."""

    ramp_end_ns: int
    drain_start_ns: int


@dataclass(frozen=True, slots=True)
class Window:
    start_ns: int
    end_ns: int

    @property
    def length_s(self) -> float:
        return (self.end_ns - self.start_ns) / NS_PER_S

    @property
    def empty(self) -> bool:
        return self.end_ns <= self.start_ns


@dataclass(frozen=True, slots=True)
class Count:
    """What one replica delivered in a window, and what was cut (outside it)."""

    tokens: int
    requests: int
    tokens_cut: int
    requests_cut: int
    length_s: float

    @property
    def output_tok_s(self) -> float:
        return self.tokens / self.length_s if self.length_s > 0 else 0.0

    @property
    def req_s(self) -> float:
        return self.requests / self.length_s if self.length_s > 0 else 0.0


def edges(records: list[RequestRecord]) -> Edges | None:
    """The replica's ramp-up end and drain start; None without a successful streamed request."""
    done = [r for r in records if r.success and r.token_ns]
    if not done:
        return None
    return ramp_and_drain(np.array([r.sent_ns for r in done]), np.array([r.token_ns[0] for r in done]),
                          np.array([r.token_ns[-1] for r in done]), max(r.sent_ns for r in records))


def ramp_and_drain(sent_ns: np.ndarray, first_ns: np.ndarray, last_ns: np.ndarray, last_send_ns: int) -> Edges | None:
    """The rule of the module docstring on columns: the successful streamed requests' sends,
    first and last tokens, and the latest send of any request (a failed one too)."""
    if not len(last_ns):
        return None
    first_done = int(last_ns.min())
    opening = first_ns[sent_ns <= first_done]  # never empty: the first done was sent before it finished
    return Edges(max(first_done, int(opening.max())), int(last_send_ns))


def common_window(spans: list[Edges]) -> Window:
    """Opens after the last replica's ramp-up, closes at the first one's drain (may be empty)."""
    return Window(max(s.ramp_end_ns for s in spans), min(s.drain_start_ns for s in spans))


def count(records: list[RequestRecord], window: Window) -> Count:
    """Tokens arrived and requests completed in ``[start, end)``; the rest is cut."""
    done = [r for r in records if r.success and r.token_ns]
    times = np.array([t for r in done for t in r.token_ns], dtype=np.int64)
    weights = np.array([k for r in done for k in (r.token_counts or (1,) * len(r.token_ns))], dtype=np.int64)
    return count_columns([(times, weights)], np.array([r.token_ns[-1] for r in done], dtype=np.int64), window)


def count_columns(events: Iterable[tuple[np.ndarray, np.ndarray]], last_ns: np.ndarray, window: Window) -> Count:
    """``count`` on columns: token events as (instants, tokens each) in as many parts as the
    caller holds them (a big run rebuilds its events a chunk at a time), and each successful
    streamed request's last-token instant."""
    tokens = total = 0
    for times, weights in events:
        total += int(weights.sum())
        tokens += int(weights[inside(window, times)].sum())
    requests = int(inside(window, last_ns).sum())
    return Count(tokens, requests, total - tokens, len(last_ns) - requests, max(0.0, window.length_s))


def inside(window: Window, t_ns: np.ndarray) -> np.ndarray:
    return (t_ns >= window.start_ns) & (t_ns < window.end_ns)


def latency_ms(values_ns: dict[str, np.ndarray], percentiles) -> dict:
    """Mean and percentiles (``p50``…) of each latency, in ms, of the requests completed in a
    window (None for one with no values): the steady state's latencies, scale's and a run's."""
    out = {}
    for name, ns in values_ns.items():
        s = stat(np.asarray(ns, dtype=float) / NS_PER_MS, percentiles)
        out[name] = {"mean": s.mean, **{f"p{p:g}": v for p, v in s.percentiles}} if len(ns) else None
    return out


def efficiency(total_rate: float, replicas: int, single_rate: float) -> float | None:
    """Scaling efficiency: what N replicas delivered together over N times one alone."""
    if replicas <= 0 or single_rate <= 0:
        return None
    return total_rate / (replicas * single_rate)


def token_rate(records: list[RequestRecord], t0_ns: int, bin_ns: int, bins: int) -> list[float]:
    """Output tok/s in consecutive ``bin_ns`` bins from ``t0_ns`` (successful requests; a
    token after the last bin is left out): a replica's timeline, for the plot."""
    counts = [0] * bins
    for r in records:
        if not r.success:
            continue
        for t, k in zip(r.token_ns, r.token_counts or (1,) * len(r.token_ns)):
            i = (t - t0_ns) // bin_ns
            if 0 <= i < bins:
                counts[i] += k
    return [c * NS_PER_S / bin_ns for c in counts]
