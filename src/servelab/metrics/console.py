"""The console block, row for row as ``vllm bench serve`` prints it.

Same labels, same order, same ``{:<40} {:<10}`` layout (trailing spaces
included), so scripts that grep vLLM's output read ours unchanged.
"""

from __future__ import annotations

import math

from servelab.metrics.summary import METRICS, Summary


def _row(label: str, value, fmt: str = "") -> str:
    return ("{:<40} {:<10" + fmt + "}").format(label, value)


def _p_word(p: float) -> str:
    return str(int(p)) if int(p) == p else str(p)


def head_rows(s: Summary, max_concurrency: int | None, request_rate: float) -> list[str]:
    rows = ["{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="),
            _row("Successful requests:", s.completed),
            _row("Failed requests:", s.failed)]
    if max_concurrency is not None:
        rows.append(_row("Maximum request concurrency:", max_concurrency))
    if not math.isinf(request_rate):
        rows.append(_row("Request rate configured (RPS):", request_rate, ".2f"))
    rows += [_row("Benchmark duration (s):", s.duration_s, ".2f"),
             _row("Total input tokens:", s.total_input),
             _row("Total generated tokens:", s.total_output),
             _row("Request throughput (req/s):", s.request_throughput, ".2f")]
    if s.request_goodput is not None:
        rows.append(_row("Request goodput (req/s):", s.request_goodput, ".2f"))
    rows += [_row("Output token throughput (tok/s):", s.output_throughput, ".2f"),
             _row("Peak output token throughput (tok/s):", s.max_output_tokens_per_s, ".2f"),
             _row("Peak concurrent requests:", s.max_concurrent_requests, ".2f"),
             _row("Total token throughput (tok/s):", s.total_token_throughput, ".2f")]
    return rows


def metric_rows(s: Summary, selected: list[str]) -> list[str]:
    rows: list[str] = []
    for key, (name, header) in METRICS.items():
        if key not in selected or key not in s.stats_ms:
            continue
        st = s.stats_ms[key]
        rows.append("{s:{c}^{n}}".format(s=header, n=50, c="-"))
        rows.append(_row(f"Mean {name} (ms):", st.mean, ".2f"))
        rows.append(_row(f"Median {name} (ms):", st.median, ".2f"))
        rows += [_row(f"P{_p_word(p)} {name} (ms):", v, ".2f") for p, v in st.percentiles]
    return rows


def probe_rows(probes: dict | None) -> list[str]:
    """vLLM's "Probe Requests" rows (--probe-request-rate), after the throughput rows."""
    if not probes:
        return []
    return ["{s:{c}^{n}}".format(s="Probe Requests", n=50, c="-"),
            _row("Probe requests completed:", probes["probe_completed"]),
            _row("Probe requests failed:", probes["probe_failed"]),
            _row("Median probe E2EL (ms):", probes["probe_median_e2el_ms"], ".2f"),
            _row("P99 probe E2EL (ms):", probes["probe_p99_e2el_ms"], ".2f"),
            _row("Max probe E2EL (ms):", probes["probe_max_e2el_ms"], ".2f")]


def console_block(s: Summary, *, max_concurrency: int | None, request_rate: float,
                  selected: list[str], probes: dict | None = None) -> str:
    rows = (head_rows(s, max_concurrency, request_rate) + probe_rows(probes) + metric_rows(s, selected)
            + ["=" * 50])
    return "\n".join(rows)
