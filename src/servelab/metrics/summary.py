"""vLLM's serving metrics, from request records (pure; no I/O, no clock).

Definitions (``vllm bench serve``; see DESIGN.md):

* TTFT   = first token-bearing event − sent
* E2EL   = last token-bearing event − sent
* TPOT   = (E2EL − TTFT) / (output_tokens − 1), requests with > 1 output token
* ITL    = every gap between consecutive token-bearing events, pooled over
           requests. Where an event carries k > 1 tokens its gap is split into k
           equal gaps ("split-by-tokens"); with one token per event this is
           vLLM's list exactly ("per-event").
* throughputs = completed requests / output tokens / input+output tokens over
           ``duration`` (dispatch start → last completion); failures count in none.
* peak output tok/s = the fullest 1-second bin of token arrivals, bins from
           the first send, each event weighted by its token count.
* peak concurrent = sweep-line maximum over half-open [sent, done) intervals of
           every request that was sent (so it can never exceed the cap).
* goodput = requests meeting every SLO given, per second (TPOT of a
           one-token request counts as 0, as in vLLM).
* statistics: mean, median, population std, percentiles with linear
  interpolation (numpy defaults); an empty list reports 0, as vLLM does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from servelab.records import RequestRecord

NS_PER_MS = 1e6
NS_PER_S = 1e9

# metric id -> (name in console rows, section header) in vLLM's order
METRICS = {
    "ttft": ("TTFT", "Time to First Token"),
    "tpot": ("TPOT", "Time per Output Token (excl. 1st token)"),
    "itl": ("ITL", "Inter-token Latency"),
    "e2el": ("E2EL", "End-to-end Latency"),
    "client_queue_time": ("Client Queue Time", "Client-side Queueing"),
    "e2el_including_client_queue": ("E2EL incl. Client Queue", "Queue-inclusive End-to-end Latency"),
}


@dataclass(frozen=True, slots=True)
class Stat:
    mean: float
    median: float
    std: float
    percentiles: tuple[tuple[float, float], ...]


@dataclass(frozen=True, slots=True)
class Summary:
    completed: int
    failed: int
    duration_s: float
    total_input: int
    total_output: int
    request_throughput: float
    request_goodput: float | None
    output_throughput: float
    total_token_throughput: float
    max_output_tokens_per_s: float
    max_concurrent_requests: int
    stats_ms: dict[str, Stat] = field(default_factory=dict)
    itl_rule: str = "per-event"


def stat(values_ms, percentiles) -> Stat:
    arr = np.asarray(values_ms if len(values_ms) else [0.0], dtype=float)
    pcts = tuple((float(p), float(np.percentile(arr, p))) for p in percentiles)
    return Stat(float(np.mean(arr)), float(np.median(arr)), float(np.std(arr)), pcts)


def tpot_ns(r: RequestRecord) -> float | None:
    if r.output_tokens <= 1:
        return None
    return (r.e2el_ns - r.ttft_ns) / (r.output_tokens - 1)


def itl_ns(r: RequestRecord) -> list[float]:
    gaps: list[float] = []
    for j in range(1, len(r.token_ns)):
        gap = r.token_ns[j] - r.token_ns[j - 1]
        k = r.token_counts[j] if j < len(r.token_counts) else 1
        gaps.extend([gap / k] * k) if k > 1 else gaps.append(gap)
    return gaps


def peak_output_per_s(ok: list[RequestRecord]) -> float:
    if not ok:
        return 0.0
    t_start = min(r.sent_ns for r in ok)
    times = np.fromiter((t for r in ok for t in r.token_ns), dtype=np.int64)
    weights = np.fromiter((_count(r, j) for r in ok for j in range(len(r.token_ns))), dtype=float)
    if not len(times):
        return 0.0
    bins = (times - t_start) // int(NS_PER_S)
    return float(np.bincount(bins[bins >= 0], weights=weights[bins >= 0]).max())


def _count(r: RequestRecord, j: int) -> int:
    return r.token_counts[j] if j < len(r.token_counts) else 1


def peak_concurrency(records: list[RequestRecord]) -> int:
    """Sweep-line over [sent, done): an end at t is processed before a start at t."""
    edges = [(r.sent_ns, 1) for r in records if r.sent_ns] + [(r.done_ns, -1) for r in records if r.sent_ns]
    edges.sort()
    level = peak = 0
    for _, step in edges:
        level += step
        peak = max(peak, level)
    return peak


def goodput_count(ok: list[RequestRecord], slo_ms: dict[str, float]) -> int:
    good = 0
    for r in ok:
        values = {"ttft": r.ttft_ns, "tpot": tpot_ns(r) or 0.0, "e2el": r.e2el_ns}
        good += all(values[k] <= v * NS_PER_MS for k, v in slo_ms.items())
    return good


def summarize(records: list[RequestRecord], duration_ns: int, percentiles=(99.0,),
              goodput_slo_ms: dict[str, float] | None = None) -> Summary:
    ok = [r for r in records if r.success]
    dur_s = duration_ns / NS_PER_S if duration_ns > 0 else float("nan")
    total_in = sum(r.prompt_len for r in ok)
    total_out = sum(r.output_tokens for r in ok)
    tpots = [t for t in map(tpot_ns, ok) if t is not None]
    series_ns = {
        "ttft": [r.ttft_ns for r in ok],
        "tpot": tpots,
        "itl": [g for r in ok for g in itl_ns(r)],
        "e2el": [r.e2el_ns for r in ok],
        "client_queue_time": [r.queue_ns for r in ok],
        "e2el_including_client_queue": [r.e2el_ns + r.queue_ns for r in ok],
    }
    stats = {k: stat([v / NS_PER_MS for v in vals], percentiles) for k, vals in series_ns.items()}
    multi = any(c > 1 for r in ok for c in r.token_counts)
    goodput = goodput_count(ok, goodput_slo_ms) / dur_s if goodput_slo_ms else None
    return Summary(
        completed=len(ok), failed=len(records) - len(ok), duration_s=dur_s,
        total_input=total_in, total_output=total_out,
        request_throughput=len(ok) / dur_s, request_goodput=goodput,
        output_throughput=total_out / dur_s, total_token_throughput=(total_in + total_out) / dur_s,
        max_output_tokens_per_s=peak_output_per_s(ok), max_concurrent_requests=peak_concurrency(records),
        stats_ms=stats, itl_rule="split-by-tokens" if multi else "per-event",
    )
