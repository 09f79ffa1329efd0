"""inference-perf's ``*_lifecycle_metrics.json`` (a stage, or the summary): aggregates in seconds.

Markers: ``successes``, ``failures`` and ``load_summary``; no version key.

Meanings (its ``reportgen/base.py``): ``time_to_first_token`` and ``time_per_output_token``
((last − first token) ÷ (output tokens − 1)) are vLLM's; ``normalized_time_per_output_token``
is E2EL ÷ output tokens, the first token included (its own row); ``inter_token_latency`` pools
gaps between *tokens*, a chunk's tokens spread over its gap — not vLLM's per-event gap (its own
row). Its ``per_request_lifecycle_metrics.json`` (a list: ``start_time``, ``end_time``, ``info``
with ``response_metrics.output_token_times``, seconds) gives servelab's own TTFT, TPOT, E2EL,
throughput and steady state; not vLLM's ITL (its token times spread a chunk's tokens, the events
are gone), which goes to the tool's own row.
"""

from __future__ import annotations

from servelab.records import RequestRecord
from servelab.results.foreign.own import own
from servelab.results.foreign.shape import foreign_result, number, stat_keys

PER_REQUEST = "inference-perf per_request_lifecycle_metrics.json"
NOT_COMPUTABLE = ("ITL (vLLM's per-event gaps: inference-perf pools per-token gaps)",
                  "steady state (aggregates only)", "peak output tok/s", "diagnosis (no engine telemetry)")


def recognise(doc) -> bool:
    return isinstance(doc, dict) and {"successes", "failures", "load_summary"} <= set(doc)


def _stats(d) -> dict:
    d = d if isinstance(d, dict) else {}
    return {"mean": d.get("mean"), "median": d.get("median"), "std": d.get("std"), "p90": d.get("p90"),
            "p99": d.get("p99")}


def read(doc: dict) -> dict:
    ok, load = doc.get("successes") or {}, doc.get("load_summary") or {}
    lat, tp = ok.get("latency") or {}, ok.get("throughput") or {}
    done, failed = number(ok.get("count")), number((doc.get("failures") or {}).get("count"))
    req_s = number(tp.get("requests_per_sec"))
    duration = done / req_s if done and req_s else None
    mean_in, mean_out = number((ok.get("prompt_len") or {}).get("mean")), number((ok.get("output_len") or {}).get("mean"))
    figures = {"duration": duration, "completed": int(done) if done is not None else None,
               "failed": int(failed or 0), "num_prompts": load.get("count"),
               "request_rate": load.get("requested_rate"),
               "total_input_tokens": mean_in * done if mean_in is not None and done else None,
               "total_output_tokens": mean_out * done if mean_out is not None and done else None,
               "request_throughput": req_s, "output_throughput": number(tp.get("output_tokens_per_sec")),
               "total_token_throughput": number(tp.get("total_tokens_per_sec"))}
    for name, key in (("ttft", "time_to_first_token"), ("tpot", "time_per_output_token"),
                      ("tpot_incl_first", "normalized_time_per_output_token"), ("itl_tool", "inter_token_latency"),
                      ("e2el", "request_latency")):
        figures.update(stat_keys(name, _stats(lat.get(key)), 1000.0))  # seconds
    return foreign_result("inference-perf", None, "inference-perf lifecycle metrics", figures,
                          not_computable=NOT_COMPUTABLE)


def recognise_requests(doc) -> bool:
    first = doc[0] if isinstance(doc, list) and doc else None
    info = first.get("info") if isinstance(first, dict) else None
    return isinstance(info, dict) and "request_metrics" in info and {"start_time", "end_time"} <= set(first)


def _record(i: int, row: dict) -> RequestRecord:
    ns = lambda t: round(float(t) * 1e9)
    info = row.get("info") or {}
    response = info.get("response_metrics") or {}
    usage = response.get("server_usage") or {}  # the server's count first, as vLLM's client takes it
    prompt = int(usage.get("prompt_tokens") or ((info.get("request_metrics") or {}).get("text") or {}).get(
        "input_tokens") or info.get("input_tokens") or 0)
    start, end = ns(row["start_time"]), ns(row["end_time"])
    base = dict(request_id=str(i), prompt_len=prompt, expected_output_len=None, intended_ns=start,
                dispatched_ns=start, sent_ns=start, done_ns=end)
    if row.get("error"):
        err = row["error"]
        return RequestRecord(**base, error=str(err.get("error_msg") or err.get("error_type") or "error"))
    times = tuple(ns(t) for t in response.get("output_token_times") or ())
    return RequestRecord(**base, token_ns=times, token_counts=(1,) * len(times),
                         output_tokens=int(response.get("output_tokens") or len(times)))


def read_requests(rows: list) -> dict:
    """servelab's own statistics from the per-request file; its per-token gaps go to the tool's ITL row."""
    o = own([_record(i, row) for i, row in enumerate(rows)], itl_as="itl_tool")
    return foreign_result("inference-perf", None, PER_REQUEST, o.figures,
                          not_computable=("ITL (vLLM's per-event gaps: the file keeps per-token times only)",
                                          "steady state (the load, rate and concurrency, is not in this file)",
                                          "diagnosis (no engine telemetry)"))
