"""servelab's own statistics from another tool's per-request rows, once they are ``RequestRecord``s:
the same summary (metrics/summary.py) and steady state (metrics/steady.py) a servelab run gets.

Each reader turns its rows into records (its clock, its units); this module does the rest, once.
The steady state needs the load's shape (rate, concurrency): without it, none is computed.
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.metrics.steady import shape_of, steady_state
from servelab.metrics.summary import summarize_tally, tally_of
from servelab.metrics.tally import Tally
from servelab.records import RequestRecord
from servelab.results.foreign.shape import stat_keys

PERCENTILES = (50.0, 90.0, 99.0)


@dataclass(frozen=True, slots=True)
class Own:
    figures: dict  # vLLM's keys, computed by servelab
    tally: Tally
    t0_ns: int


def own(records: list[RequestRecord], itl_as: str = "itl") -> Own:
    """``itl_as``: the key the pooled gaps go to ("itl_tool" when the rows' instants are not events)."""
    records = sorted(records, key=lambda r: r.sent_ns)
    tally = tally_of(records)
    t0 = records[0].sent_ns
    s = summarize_tally(tally, max(r.done_ns for r in records) - t0, PERCENTILES)
    figures = {"duration": s.duration_s, "completed": s.completed, "failed": s.failed, "num_prompts": len(records),
               "total_input_tokens": s.total_input, "total_output_tokens": s.total_output,
               "request_throughput": s.request_throughput, "output_throughput": s.output_throughput,
               "total_token_throughput": s.total_token_throughput,
               "max_output_tokens_per_s": s.max_output_tokens_per_s,
               "max_concurrent_requests": s.max_concurrent_requests}
    for name, st in s.stats_ms.items():
        figures.update(stat_keys(itl_as if name == "itl" else name,
                                 {"mean": st.mean, "median": st.median, "std": st.std,
                                  **{f"p{int(p)}": v for p, v in st.percentiles}}))
    return Own(figures, tally, t0)


def steady(o: Own, request_rate, max_concurrency) -> dict:
    """The steady-state section for a load of this shape (``request_rate``: a number or "inf")."""
    shape = shape_of(float(request_rate or "inf"), max_concurrency, None)
    return steady_state(o.tally, o.t0_ns, shape, PERCENTILES)
