"""SGLang's ``bench_serving`` output: one JSON object a run, appended as a line.

Markers: ``server_info`` (newer; null when the server has no /get_server_info) or
``*_e2e_latency_ms`` beside ``completed`` and ``duration``.
Its TTFT, TPOT and ITL follow vLLM's client (``bench_serving`` began as a copy of it); E2EL is
named ``*_e2e_latency_ms``. No version key: the server's version is in ``server_info``.
"""

from __future__ import annotations

from servelab.results.foreign.shape import foreign_result, number, stat_keys

NOT_COMPUTABLE = ("steady state (aggregates only)", "diagnosis (no engine telemetry)")


def recognise(doc) -> bool:
    return isinstance(doc, dict) and "completed" in doc and "duration" in doc and (
        "server_info" in doc or "mean_e2e_latency_ms" in doc)


def read(doc: dict) -> dict:
    figures = {k: doc.get(k) for k in ("duration", "completed", "total_input_tokens", "total_output_tokens",
                                        "request_throughput", "output_throughput", "max_concurrency",
                                        "request_rate")}
    figures["num_prompts"] = doc.get("num_prompts") or doc.get("completed")
    if figures["request_rate"] == float("inf"):  # its JSON writes Infinity; vLLM's and servelab's write "inf"
        figures["request_rate"] = "inf"
    total = number(doc.get("total_throughput"))
    if total is None and None not in (number(doc.get("input_throughput")), number(doc.get("output_throughput"))):
        total = doc["input_throughput"] + doc["output_throughput"]
    figures["total_token_throughput"] = total
    for name, key in (("ttft", "ttft"), ("tpot", "tpot"), ("itl", "itl"), ("e2el", "e2e_latency")):
        figures.update(stat_keys(name, {s: doc.get(f"{s}_{key}_ms") for s in ("mean", "median", "std", "p90", "p99")}))
    info = doc.get("server_info") if isinstance(doc.get("server_info"), dict) else {}
    return foreign_result("sglang bench_serving", info.get("version"), "SGLang bench_serving JSONL", figures,
                          not_computable=NOT_COMPUTABLE)
