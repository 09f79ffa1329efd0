"""AIPerf's ``profile_export_aiperf.json`` (aggregates) and ``profile_export.jsonl`` (a record a request).

Markers: the summary's metrics are ``{unit, avg, p50…}`` objects (``request_throughput``,
``time_to_first_token``…), with ``schema_version`` (1.0–1.5) and ``aiperf_version`` in newer
releases and ``input_config`` in all; a record line has ``metadata.x_request_id``, epoch-ns
``request_start_ns``/``request_end_ns`` and ``metrics.<tag>.{value, unit}``.

Meanings (AIPerf's metrics reference): its ``inter_token_latency`` is (E2EL − TTFT) ÷ (output
tokens − 1) per request, vLLM's TPOT; ``inter_chunk_latency`` lists a request's gaps between
chunks, vLLM's ITL events. From the records servelab computes its own statistics (TTFT, TPOT,
pooled ITL, E2EL, throughput, steady state); the summary alone gives AIPerf's aggregates only.
"""

from __future__ import annotations

from servelab.records import RequestRecord
from servelab.results.foreign.own import own, steady
from servelab.results.foreign.shape import foreign_result, number, stat_keys

KNOWN_SCHEMAS = ("1.0", "1.1", "1.2", "1.3", "1.4", "1.5")
NOT_COMPUTABLE = ("ITL (vLLM's pooled gaps: not in AIPerf's summary; give profile_export.jsonl beside it)",
                  "steady state (no per-request records beside the summary)", "diagnosis (no engine telemetry)")
_SCALE = {"ms": 1.0, "sec": 1000.0, "s": 1000.0, "us": 0.001, "ns": 1e-6}


def recognise_summary(doc) -> bool:
    if not isinstance(doc, dict):
        return False
    metric = doc.get("request_throughput") or doc.get("time_to_first_token")
    return isinstance(metric, dict) and "unit" in metric and "avg" in metric


def recognise_record(doc) -> bool:
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    return isinstance(meta, dict) and "x_request_id" in meta and "request_start_ns" in meta


def _stats(doc: dict, tag: str) -> tuple[dict, float]:
    m = doc.get(tag) or {}
    return ({"mean": m.get("avg"), "median": m.get("p50"), "std": m.get("std"), "p90": m.get("p90"),
             "p99": m.get("p99")}, _SCALE.get(str(m.get("unit", "ms")).split("/")[0], 1.0))


def _avg(doc: dict, tag: str) -> float | None:
    return number((doc.get(tag) or {}).get("avg"))


def _load(doc: dict) -> dict:
    """The profiling phase's load: ``input_config.phases`` (0.13), ``input_config.loadgen`` (before)."""
    config = doc.get("input_config") or {}
    phases = [p for p in config.get("phases") or [] if isinstance(p, dict) and p.get("kind") == "profiling"]
    load = phases[0] if phases else (config.get("loadgen") or {})
    models = (config.get("models") or {}).get("items") or [{}]
    return {"max_concurrency": load.get("concurrency"), "request_rate": load.get("request_rate") or "inf",
            "num_prompts": load.get("requests", load.get("request_count")),
            "model_id": models[0].get("name") if isinstance(models[0], dict) else None}


def _version(doc: dict) -> tuple[str | None, list[str]]:
    schema = doc.get("schema_version")
    notes = []
    if schema is not None and str(schema) not in KNOWN_SCHEMAS:
        notes.append(f"AIPerf schema version {schema}: read as version {KNOWN_SCHEMAS[-1]}")
    return doc.get("aiperf_version"), notes


def read_summary(doc: dict, records: list[dict] | None = None) -> dict:
    """One run; with its records, servelab's own statistics replace AIPerf's aggregates."""
    version, notes = _version(doc)
    form = f"AIPerf profile_export_aiperf.json (schema {doc.get('schema_version', 'before 1.0')})"
    if records:
        return read_records(records, version, form + " + profile_export.jsonl", _load(doc), notes)
    done, failed = _avg(doc, "request_count"), _avg(doc, "error_request_count")
    isl = _avg(doc, "total_usage_prompt_tokens") or _avg(doc, "total_isl")  # the server's count first
    osl = _avg(doc, "total_usage_completion_tokens") or _avg(doc, "total_osl")
    duration = _avg(doc, "benchmark_duration")
    figures = {"duration": duration, "completed": int(done) if done is not None else None,
               "failed": int(failed or 0), "total_input_tokens": isl, "total_output_tokens": osl,
               "request_throughput": _avg(doc, "request_throughput"),
               "output_throughput": _avg(doc, "output_token_throughput"),
               "total_token_throughput": (isl + osl) / duration if None not in (isl, osl) and duration else None,
               **_load(doc)}
    for name, tag in (("ttft", "time_to_first_token"), ("tpot", "inter_token_latency"), ("e2el", "request_latency")):
        figures.update(stat_keys(name, *_stats(doc, tag)))
    return foreign_result("aiperf", version, form, figures, not_computable=NOT_COMPUTABLE, notes=notes)


def _record(line: dict, i: int) -> RequestRecord:
    meta, metrics = line["metadata"], line.get("metrics") or {}
    value = lambda tag: (metrics.get(tag) or {}).get("value")
    start, end = int(meta["request_start_ns"]), int(meta.get("request_end_ns") or meta["request_start_ns"])
    # the server's usage count first, as vLLM's client (and servelab) take it; AIPerf's ISL is its tokenizer's
    prompt = int(value("usage_prompt_tokens") or value("input_sequence_length") or value("error_isl") or 0)
    if line.get("error"):
        err = line["error"]
        return RequestRecord(str(meta["x_request_id"]), prompt, None, start, start, start, end,
                             error=str(err.get("message") or err.get("type") or "error"),
                             http_status=err.get("code"))
    ttft_ms, gaps_ms = value("time_to_first_token"), value("inter_chunk_latency") or []
    tokens = []
    if ttft_ms is not None:
        t = start + round(ttft_ms * 1e6)
        tokens = [t]
        for gap in gaps_ms:
            t += round(gap * 1e6)
            tokens.append(t)
    out = int(value("output_sequence_length") or value("output_token_count") or len(tokens))
    return RequestRecord(str(meta["x_request_id"]), prompt, None, start, start, start, end,
                         token_ns=tuple(tokens), token_counts=(1,) * len(tokens), output_tokens=out,
                         prompt_len_source="usage" if value("usage_prompt_tokens") else "dataset")


def read_records(lines: list[dict], version: str | None = None, form: str = "AIPerf profile_export.jsonl",
                 load: dict | None = None, notes=()) -> dict:
    """servelab's own statistics from AIPerf's records (its epoch-ns stamps are one clock)."""
    o = own([_record(line, i) for i, line in enumerate(lines)])
    figures = {**o.figures, **{k: v for k, v in (load or {}).items() if v is not None}}
    unknown = () if load else ("steady state (the load, rate and concurrency, is in the summary, not the records)",)
    result = foreign_result("aiperf", version, form, figures, notes=notes,
                            not_computable=(*unknown, "diagnosis (no engine telemetry)"))
    if load:  # the plateau's rule depends on the load's shape
        result["servelab"]["steady_state"] = steady(o, load["request_rate"], load["max_concurrency"])
    return result
