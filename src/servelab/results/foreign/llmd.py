"""The llm-d Benchmark Report v0.2.1: one document per load point, read and written here.

Markers: ``version`` "0.2.x" with ``run`` and ``results`` (the schema's required keys).
The schema (vendored beside this file, with its source) admits no extra keys, so servelab's
own section travels in ``scenario.load.native.config`` ("servelab") and its flags in
``scenario.load.native.args``. The report holds no per-request rows: the records JSONL stays
beside it. Units follow each statistic's ``units``; ``normalized_time_per_output_token``
(E2EL ÷ output tokens) gets its own row; ``inter_token_latency`` is vLLM's per-event ITL only
when servelab or vLLM wrote the report (the schema says it "may differ depending on tool").
"""

from __future__ import annotations

import re
from pathlib import Path

from servelab.results.foreign.shape import foreign_result, number, stat_keys

VERSION = "0.2.1"
SCHEMA = Path(__file__).with_name("llmd_br_v0_2_1.schema.json")
# (servelab metric, the report's latency key)
LATENCIES = (("ttft", "time_to_first_token"), ("tpot", "time_per_output_token"),
             ("itl", "inter_token_latency"), ("e2el", "request_latency"),
             ("tpot_incl_first", "normalized_time_per_output_token"))
THROUGHPUTS = (("output_throughput", "output_token_rate", "tokens/s"),
               ("total_token_throughput", "total_token_rate", "tokens/s"),
               ("request_throughput", "request_rate", "queries/s"))
_PCT = ("p0p1", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "p99p9")  # the schema's
_TO_MS = {"s": 1000.0, "ms": 1.0, "s/token": 1000.0, "ms/token": 1.0}
_SAME_ITL = ("servelab", "vllm bench serve", "vllm")
NOT_COMPUTABLE = ("steady state (the report holds no per-request rows)", "diagnosis (no engine telemetry)")


def recognise(doc) -> bool:
    return (isinstance(doc, dict) and {"run", "results"} <= set(doc)
            and str(doc.get("version", "")).startswith("0.2"))


# ---- reading

def read(doc: dict) -> dict:
    notes = [] if doc.get("version") == VERSION else \
        [f"llm-d Benchmark Report version {doc.get('version')}: read as version {VERSION}"]
    load = ((doc.get("scenario") or {}).get("load") or {})
    std, native = load.get("standardized") or {}, load.get("native") or {}
    agg = (((doc.get("results") or {}).get("request_performance") or {}).get("aggregate") or {})
    reqs = agg.get("requests") or {}
    total, failures = number(reqs.get("total")), number(reqs.get("failures")) or 0
    done = total - failures - (number(reqs.get("incomplete")) or 0) if total is not None else None
    # inference-perf's own reports (inference-perf.partial.stage_N.yaml) name no tool but their run ids do
    tool = std.get("tool") or ("inference-perf" if str(doc["run"].get("uid", "")).startswith("inference-perf")
                               else "llm-d report")
    figures = {"duration": _seconds(((doc["run"].get("time") or {}).get("duration"))),
               "completed": int(done) if done is not None else None, "failed": int(failures),
               "num_prompts": int(total) if total is not None else None,
               "request_rate": std.get("rate_qps") or "inf", "max_concurrency": std.get("concurrency")}
    for key, name, _ in THROUGHPUTS:
        figures[key] = number(((agg.get("throughput") or {}).get(name) or {}).get("mean"))
    for side, name in (("total_input_tokens", "input_length"), ("total_output_tokens", "output_length")):
        mean = number((reqs.get(name) or {}).get("mean"))
        figures[side] = mean * done if mean is not None and done else None
    for metric, name in LATENCIES:
        if metric == "itl" and tool not in _SAME_ITL:
            metric = "itl_tool"
        figures.update(_latency(metric, (agg.get("latency") or {}).get(name)))
    config = native.get("config") if isinstance(native.get("config"), dict) else {}
    result = foreign_result(tool, std.get("tool_version"), f"llm-d Benchmark Report v{doc.get('version')}",
                            figures, not_computable=NOT_COMPUTABLE, notes=notes)
    if isinstance(config.get("servelab"), dict):  # servelab's own section, back where it was
        result["servelab"] = {**config["servelab"], **result["servelab"]}
    return result


def _latency(metric: str, stats) -> dict:
    if not isinstance(stats, dict) or stats.get("units") not in _TO_MS:
        return {}
    return stat_keys(metric, {"mean": stats.get("mean"), "median": stats.get("p50"), "std": stats.get("stddev"),
                              "p90": stats.get("p90"), "p99": stats.get("p99")}, _TO_MS[stats["units"]])


def _seconds(iso) -> float | None:
    """ISO-8601 duration (PT49.97S, PT1M2S, PT1H…) in seconds."""
    found = re.fullmatch(r"PT(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?", str(iso or ""))
    if not found or not any(found.groups()):
        return None
    h, m, s = (float(g or 0) for g in found.groups())
    return h * 3600 + m * 60 + s


# ---- writing

def report_of(result: dict, uid: str, eid: str | None = None) -> dict:
    """One servelab result (one load point) as a report; ``eid``: the study's run id, shared by
    all its load points."""
    s = result.get("servelab") if isinstance(result.get("servelab"), dict) else {}
    tool_version = str(s.get("version") or (s.get("provenance") or {}).get("servelab_version") or "unknown")
    run = {"uid": uid, "eid": eid, "time": _time(result, s)}
    return {"version": VERSION, "run": {k: v for k, v in run.items() if v is not None},
            "scenario": {"load": _load(result, s, tool_version)},
            "results": {"request_performance": {"aggregate": _aggregate(result)}}}


def _time(result: dict, s: dict) -> dict | None:
    duration = number(result.get("duration"))
    out = {"duration": f"PT{duration:.9f}S" if duration is not None else None, "start": _instant(s.get("wall_start"))}
    out = {k: v for k, v in out.items() if v is not None}
    return out or None


def _instant(text) -> str | None:
    """servelab's ``wall_start`` (local ISO time) with its offset, as RFC 3339's date-time wants."""
    from datetime import datetime

    try:
        return datetime.fromisoformat(text).astimezone().isoformat()
    except (TypeError, ValueError):
        return None


def _load(result: dict, s: dict, tool_version: str) -> dict:
    done = number(result.get("completed")) or 0
    mean_in = (number(result.get("total_input_tokens")) or 0) / done if done else 0
    flags = ((s.get("provenance") or {}).get("flags") or {})
    rate, conc = number(result.get("request_rate")), result.get("max_concurrency")
    std = {"tool": "servelab", "tool_version": tool_version,
           "source": "random" if flags.get("dataset_name") == "random" else "sampled" if flags else "unknown",
           "input_seq_len": {"distribution": "other", "value": mean_in}}
    if rate and rate > 0:
        std["rate_qps"] = rate
    if isinstance(conc, int) and conc >= 1:
        std["concurrency"] = conc
    extras = {k: v for k, v in s.items() if k not in ("foreign",)}
    return {"metadata": {"schema_version": "0.0.1", "description": "servelab bench"}, "standardized": std,
            "native": {"args": flags if isinstance(flags, dict) else None, "config": {"servelab": extras}}}


def _aggregate(result: dict) -> dict:
    done, failed = int(result.get("completed") or 0), int(result.get("failed") or 0)
    requests = {"total": done + failed, "failures": failed}
    for name, key in (("input_length", "total_input_tokens"), ("output_length", "total_output_tokens")):
        total = number(result.get(key))
        if total is not None and done:
            requests[name] = {"units": "count", "mean": total / done}
    throughput = {name: {"units": unit, "mean": number(result.get(key))}
                  for key, name, unit in THROUGHPUTS if number(result.get(key)) is not None}
    latency = {}
    for metric, name in LATENCIES:
        stats = _stats_of(result, metric)
        if stats:
            latency[name] = stats
    return {"requests": requests, "latency": latency, "throughput": throughput}


def _stats_of(result: dict, metric: str) -> dict | None:
    """servelab's ``{stat}_{metric}_ms`` keys as the schema's Statistics, in ms."""
    mean = number(result.get(f"mean_{metric}_ms"))
    if mean is None:
        return None
    out = {"units": "ms/token" if "tpot" in metric or metric == "itl" else "ms", "mean": mean}
    std = number(result.get(f"std_{metric}_ms"))
    if std is not None:
        out["stddev"] = std
    for key, value in result.items():
        found = re.fullmatch(rf"(median|p[\d.]+)_{metric}_ms", key)
        name = "p50" if found and found.group(1) == "median" else (found.group(1).replace(".", "p") if found else "")
        if name in _PCT and number(value) is not None:
            out[name] = number(value)
    return out


def report_path(result_path: Path, date: str, append: bool) -> Path:
    """Beside the result, as its records are; with --append-result one report per run, by date."""
    stem = Path(result_path).with_suffix("")
    return Path(f"{stem}.{date}.llm-d-report.json" if append else f"{stem}.llm-d-report.json")


def run_id(*parts) -> str:
    """An id derived from what names the run (its result file, its date): the same run, the same id."""
    import hashlib

    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:32]


def write(result: dict, path: Path, eid: str | None = None) -> Path:
    """The report of one load point, written whole (a new file by rename)."""
    import json

    from servelab.results.records_file import write_atomic
    from servelab.results.store import finite

    doc = report_of(result, run_id(Path(path).resolve(), result.get("date", "")), eid)
    write_atomic(Path(path), [json.dumps(finite(doc), indent=1)])
    return Path(path)
