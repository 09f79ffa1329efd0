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

from servelab.metrics.tally import FAILED, OK, Tally
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
    return _peak_output(tally_of(ok))


def peak_concurrency(records: list[RequestRecord]) -> int:
    return _peak_concurrency(tally_of(records))


def summarize(records: list[RequestRecord], duration_ns: int, percentiles=(99.0,),
              goodput_slo_ms: dict[str, float] | None = None) -> Summary:
    return summarize_tally(tally_of(records), duration_ns, percentiles, goodput_slo_ms)


def tally_of(records: list[RequestRecord], detailed: bool = False) -> Tally:
    """Records held in memory (tests, small runs) as a tally (their texts kept when ``detailed``)."""
    tally = Tally(records, detailed)
    for i, r in enumerate(records):
        tally.add(i, r)
    return tally


def columns_ns(t: Tally) -> dict[str, np.ndarray]:
    """Per successful request, in the run's order: its TTFT, E2EL and queue time (int64 ns) and
    TPOT (float ns, NaN where it has none). A request with no event has TTFT 0 and E2EL to done."""
    c, ok = t.col, t.mask(OK)
    sent, events = c["sent_ns"][ok], c["events"][ok]
    ttft = np.where(events > 0, c["first_ns"][ok] - sent, 0)
    e2el = np.where(events > 0, c["last_ns"][ok], c["done_ns"][ok]) - sent
    out = c["output_tokens"][ok].astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        tpot = np.where(out > 1, (e2el - ttft) / (out - 1), np.nan)
    return {"ttft": ttft, "tpot": tpot, "e2el": e2el, "queue": sent - c["dispatched_ns"][ok]}


def summarize_tally(t: Tally, duration_ns: int, percentiles=(99.0,),
                    goodput_slo_ms: dict[str, float] | None = None) -> Summary:
    ok, c = t.mask(OK), t.col
    n_ok = int(ok.sum())
    dur_s = duration_ns / NS_PER_S if duration_ns > 0 else float("nan")
    total_in, total_out = int(c["prompt_len"][ok].sum()), int(c["output_tokens"][ok].sum())
    v = columns_ns(t)
    series_ns = {"ttft": lambda: v["ttft"], "tpot": lambda: v["tpot"][~np.isnan(v["tpot"])],
                 "e2el": lambda: v["e2el"], "client_queue_time": lambda: v["queue"],
                 "e2el_including_client_queue": lambda: v["e2el"] + v["queue"]}
    # one series at a time: at 500k requests each float copy (and numpy's own) is 4 MB
    stats = {k: stat(vals() / NS_PER_MS, percentiles) for k, vals in series_ns.items()}
    goodput = _good(v, goodput_slo_ms) / dur_s if goodput_slo_ms else None
    del v, series_ns  # let the columns go before the ITL pool and the peaks are read
    stats["itl"] = itl_stat(t, percentiles)
    multi = any(c["status"][i] == OK for i in t.counts)
    return Summary(
        completed=n_ok, failed=int(t.mask(FAILED).sum()), duration_s=dur_s,
        total_input=total_in, total_output=total_out,
        request_throughput=n_ok / dur_s, request_goodput=goodput,
        output_throughput=total_out / dur_s, total_token_throughput=(total_in + total_out) / dur_s,
        max_output_tokens_per_s=_peak_output(t), max_concurrent_requests=_peak_concurrency(t),
        stats_ms={k: stats[k] for k in METRICS}, itl_rule="split-by-tokens" if multi else "per-event",
    )


def _good(v: dict[str, np.ndarray], slo_ms: dict[str, float]) -> int:
    """Requests meeting every SLO given (TPOT of a one-token request counts as 0, as in vLLM)."""
    values = {"ttft": v["ttft"], "tpot": np.nan_to_num(v["tpot"]), "e2el": v["e2el"]}
    good = np.ones(len(v["ttft"]), dtype=bool)
    for k, limit in slo_ms.items():
        good &= values[k] <= limit * NS_PER_MS
    return int(good.sum())


def _peak_output(t: Tally) -> float:
    ok = t.mask(OK)
    if not ok.any():
        return 0.0
    bins = t.peak_bins(int(t.col["sent_ns"][ok].min()))
    return float(bins.max()) if len(bins) else 0.0


def _peak_concurrency(t: Tally) -> int:
    """Sweep-line over [sent, done) of every request sent, an end at t before a start at t:
    after the k-th start (in time order) k + 1 have started and every end ≤ its time is done."""
    sent = t.col["status"].astype(bool) & (t.col["sent_ns"] != 0)
    starts, ends = np.sort(t.col["sent_ns"][sent]), np.sort(t.col["done_ns"][sent])
    if not len(starts):
        return 0
    return int((np.arange(1, len(starts) + 1) - np.searchsorted(ends, starts, side="right")).max())


# Above this many pooled gaps the ITL statistics take no copy of the pool: a float copy
# and numpy's own copy for the percentiles would take 250 MB for a 500k-request soak (15 M gaps).
_LEAN_ITL = 1 << 20
# gaps read at a time there: a 4 MB block's float and int64 temporaries took ~15 MB of the
# 500k soak's peak; a slice's take 1.5 MB
_SLICE = 1 << 16


def itl_stat(t: Tally, percentiles) -> Stat:
    """ITL statistics over the pooled gaps of successful requests; exact either way."""
    if t.split_gaps_needed():  # rare: rebuild each request's gaps by the one rule (itl_ns)
        return stat([g / NS_PER_MS for i in np.flatnonzero(t.mask(OK)) for g in itl_ns(t.record(int(i)))],
                    percentiles)
    parts = t.pool()
    if t.n_gaps < _LEAN_ITL:
        return stat(np.concatenate(parts) / NS_PER_MS if parts else [], percentiles)
    return _lean_stat(parts, t.n_gaps, percentiles)


def _lean_stat(parts: list[np.ndarray], n: int, percentiles) -> Stat:
    """Mean, median, population std and numpy's linear percentiles of ``n`` uint32 gaps held
    in blocks, in ms, reading them block by block: the values at the ranks needed come from
    two 16-bit histograms (high half, then low half within the high bin), so nothing is
    sorted or copied whole."""
    parts = [p[k:k + _SLICE] for p in parts for k in range(0, len(p), _SLICE)]  # views: small temporaries
    mean = sum(int(p.sum(dtype=np.uint64)) for p in parts) / n
    sq = sum(float(np.square(p - mean).sum()) for p in parts)
    picks = {p: p / 100 * (n - 1) for p in percentiles}
    mid = [(n - 1) // 2, n // 2]  # numpy's median: the mean of the middle one or two
    ranks = sorted({r for v in picks.values() for r in (int(v), min(int(v) + 1, n - 1))} | set(mid))
    at = dict(zip(ranks, (v / NS_PER_MS for v in _ranked(parts, ranks))))

    def lerp(v: float) -> float:  # numpy's rule, from whichever end is nearer
        lo = int(v)
        a, b, f = at[lo], at[min(lo + 1, n - 1)], v - lo
        return b - (b - a) * (1 - f) if f >= 0.5 else a + (b - a) * f

    pcts = tuple((float(p), lerp(v)) for p, v in picks.items())
    median = float(np.mean([at[mid[0]], at[mid[1]]]))
    return Stat(mean / NS_PER_MS, median, (sq / n) ** 0.5 / NS_PER_MS, pcts)


def _ranked(parts: list[np.ndarray], ranks: list[int]) -> list[int]:
    """The values at 0-based ``ranks`` of the sorted gaps, exactly."""
    high = np.zeros(1 << 16, np.int64)
    for p in parts:
        high += np.bincount(p >> 16, minlength=1 << 16)
    high = np.cumsum(high)
    out = []
    for r in ranks:
        b = int(np.searchsorted(high, r, side="right"))
        below = int(high[b - 1]) if b else 0
        low = np.zeros(1 << 16, np.int64)
        for p in parts:
            low += np.bincount(p[(p >> 16) == b] & 0xFFFF, minlength=1 << 16)
        out.append((b << 16) | int(np.searchsorted(np.cumsum(low), r - below, side="right")))
    return out
