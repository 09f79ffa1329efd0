"""GuideLLM's ``benchmarks.json``: one report, a benchmark per load point.

Markers: a ``benchmarks`` list whose entries carry ``metrics.time_to_first_token_ms``;
``metadata.version`` (1 for 0.5–0.6, 2 from 0.7) and ``metadata.guidellm_version``; older
reports have ``args`` and no ``metadata``.

Meanings (GuideLLM's ``schemas/request_stats.py``): ``time_per_output_token_ms`` is
(last token − start) ÷ output tokens, the first token included — not vLLM's TPOT, so it
gets its own row; ``inter_token_latency_ms`` is (last − first) ÷ (output tokens − 1), vLLM's
TPOT — its distribution counts each request once per token (count = tokens), so its mean is
vLLM's mean TPOT exactly when output lengths are equal, and token-weighted otherwise;
``request_latency`` is in seconds. Its distributions are over requests' averages, so vLLM's
pooled per-event ITL cannot be had; its per-request lists may be a sample (``sample_size``).
When they are complete, servelab computes TTFT, TPOT and E2EL statistics from them itself
(each request once, numpy's percentiles, as vLLM does); from a sample, GuideLLM's own stand.
"""

from __future__ import annotations

from servelab.results.foreign.shape import foreign_result, number, stat_keys

KNOWN_VERSIONS = (1, 2)
_CLOSED = ("throughput", "concurrent", "synchronous")
NOT_COMPUTABLE = ("ITL (vLLM's pooled per-event gaps: GuideLLM keeps per-request averages only)",
                  "peak output tok/s", "diagnosis (no engine telemetry)")
# why servelab's steady state is not computed from the per-request rows
SAMPLE = "steady state (its per-request lists are a sample)"
NO_INSTANTS = "steady state (its per-request rows keep the first and last token's instants only)"


def recognise(doc) -> bool:
    benchmarks = doc.get("benchmarks") if isinstance(doc, dict) else None
    return (isinstance(benchmarks, list) and bool(benchmarks) and isinstance(benchmarks[0], dict)
            and "time_to_first_token_ms" in (benchmarks[0].get("metrics") or {}))


def read(doc: dict, stem: str) -> list[dict]:
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    version = meta.get("version", 1 if "args" in doc or not meta else None)
    notes = []
    if version not in KNOWN_VERSIONS:
        notes.append(f"GuideLLM report version {version}: read as version {KNOWN_VERSIONS[-1]}")
    tool_version = meta.get("guidellm_version")
    return [foreign_result("guidellm", tool_version, f"GuideLLM benchmarks.json v{version}",
                           {**_figures(b), **_from_rows(b)}, not_computable=(*NOT_COMPUTABLE, SAMPLE if _sampled(b)
                                                                              else NO_INSTANTS),
                           sampled=_sampled(b), notes=notes + _rows_note(b),
                           label=f"{stem}@{_strategy(b)}" if len(doc["benchmarks"]) > 1 else None)
            for b in doc["benchmarks"]]


# a request's own figures in its row (GuideLLM's computed fields), by servelab's names and scale
_ROW_METRICS = (("ttft", "time_to_first_token_ms", 1.0), ("tpot", "inter_token_latency_ms", 1.0),
                ("tpot_incl_first", "time_per_output_token_ms", 1.0), ("e2el", "request_latency", 1000.0))


def _complete_rows(b: dict) -> list[dict]:
    """Its successful requests' rows when every one is there (not a sample); else []."""
    rows = (b.get("requests") or {}).get("successful")
    total = ((b.get("metrics") or {}).get("request_totals") or {}).get("successful")
    return rows if isinstance(rows, list) and rows and len(rows) == total else []


def _from_rows(b: dict) -> dict:
    """servelab's own statistics over the rows (vLLM's: each request once, numpy's percentiles), in place
    of GuideLLM's (its TPOT distribution counts a request once per token)."""
    import numpy as np

    out = {}
    for name, key, scale in _ROW_METRICS:
        values = [number(row.get(key)) for row in _complete_rows(b)]
        values = np.array([x * scale for x in values if x is not None])
        if values.size:
            out.update(stat_keys(name, {"mean": values.mean(), "median": np.median(values), "std": values.std(),
                                        "p90": np.percentile(values, 90), "p99": np.percentile(values, 99)}))
    return out


def _rows_note(b: dict) -> list[str]:
    rows = _complete_rows(b)
    return [f"TTFT, TPOT and E2EL statistics computed by servelab from its {len(rows)} per-request rows"] if rows else []


def _ok(metrics: dict, name: str) -> dict:
    """The successful requests' distribution, in servelab's stat names."""
    found = (metrics.get(name) or {}).get("successful") or {}
    pct = found.get("percentiles") or {}
    return {"mean": found.get("mean"), "median": found.get("median", pct.get("p50")), "std": found.get("std_dev"),
            "p90": pct.get("p90"), "p99": pct.get("p99"), "total_sum": found.get("total_sum")}


def _figures(b: dict) -> dict:
    m = b.get("metrics") or {}
    totals = m.get("request_totals") or {}
    done, failed = number(totals.get("successful")), number(totals.get("errored"))
    duration = number(b.get("duration"))
    if duration is None:
        sched = b.get("scheduler_metrics") or b.get("run_stats") or {}
        start, end = number(sched.get("measure_start_time")), number(sched.get("measure_end_time"))
        duration = end - start if start is not None and end is not None else None
    out_tokens = number(_ok(m, "output_token_count")["total_sum"])
    in_tokens = number(_ok(m, "prompt_token_count")["total_sum"])
    rate = lambda x: x / duration if x is not None and duration else None
    strategy = (b.get("config") or {}).get("strategy") or {}
    figures = {
        "duration": duration, "completed": int(done) if done is not None else None,
        "failed": int(failed) if failed is not None else None,
        "num_prompts": int(number(totals.get("total")) or 0) or None,
        "total_input_tokens": in_tokens, "total_output_tokens": out_tokens,
        "request_throughput": rate(done), "output_throughput": rate(out_tokens),
        "total_token_throughput": rate((in_tokens or 0) + out_tokens) if out_tokens is not None else None,
        "max_concurrency": strategy.get("streams") if strategy.get("type_") == "concurrent" else
        (1 if strategy.get("type_") == "synchronous" else None),
        # a closed loop (concurrent, synchronous) or all at once (throughput): vLLM's rate inf
        "request_rate": strategy.get("rate", "inf" if strategy.get("type_") in _CLOSED else None),
        "model_id": ((b.get("config") or {}).get("backend") or {}).get("model"),
    }
    figures.update(stat_keys("ttft", _ok(m, "time_to_first_token_ms")))
    figures.update(stat_keys("tpot", _ok(m, "inter_token_latency_ms")))  # GuideLLM's ITL is vLLM's TPOT
    figures.update(stat_keys("tpot_incl_first", _ok(m, "time_per_output_token_ms")))
    figures.update(stat_keys("e2el", _ok(m, "request_latency"), 1000.0))  # seconds
    return figures


def _sampled(b: dict) -> str | None:
    kept = (b.get("requests") or {}).get("successful")
    total = ((b.get("metrics") or {}).get("request_totals") or {}).get("successful")
    if isinstance(kept, list) and isinstance(total, int) and len(kept) < total:
        return f"sampled {len(kept)} of {total} requests"
    return None


def _strategy(b: dict) -> str:
    s = (b.get("config") or {}).get("strategy") or {}
    kind = s.get("type_", "?")
    return f"{kind}{s['streams']}" if "streams" in s else f"{kind}{s.get('rate', '')}"
