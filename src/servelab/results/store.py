"""Results on disk: vLLM's result JSON (its keys, so existing scripts read it)
plus a ``servelab`` section, and per-request records as JSONL beside it, appended
as requests complete (``RecordSink``), in the order they completed.

vLLM's file rules are kept: the default name is
``{label}-{rate}qps[-concurrency{N}]-{model}-{YYYYmmdd-HHMMSS}.json``;
``--append-result`` appends one JSON object per run, newline-separated.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from servelab.metrics.summary import NS_PER_MS, NS_PER_S, Summary, itl_ns
from servelab.metrics.tally import OK, Tally
from servelab.records import RequestRecord

# per-request lists vLLM drops unless --save-detailed
DETAILED_KEYS = ("input_lens", "output_lens", "start_times", "ttfts", "itls", "generated_texts", "errors")


def result_filename(label: str | None, backend: str, request_rate: float, max_concurrency: int | None,
                    model_id: str, date: str, result_filename: str | None, result_dir: str | None,
                    ramp: tuple | None = None) -> Path:
    """``ramp``: (strategy, start, end) — vLLM names a ramp's file ``…-ramp-up-{s}-{a}qps-{b}qps…``."""
    conc = f"-concurrency{max_concurrency}" if max_concurrency is not None else ""
    rate = f"{request_rate}qps" if ramp is None else f"ramp-up-{ramp[0]}-{ramp[1]}qps-{ramp[2]}qps"
    name = f"{label or backend}-{rate}{conc}-{model_id.split('/')[-1]}-{date}.json"
    name = result_filename or name
    if result_dir:
        os.makedirs(result_dir, exist_ok=True)
        return Path(result_dir) / name
    return Path(name)


def metric_keys(s: Summary, selected: list[str]) -> dict:
    out: dict = {}
    for key in selected:
        st = s.stats_ms.get(key)
        if st is None:
            continue
        out[f"mean_{key}_ms"] = st.mean
        out[f"median_{key}_ms"] = st.median
        out[f"std_{key}_ms"] = st.std
        for p, v in st.percentiles:
            out[f"p{str(int(p)) if int(p) == p else str(p)}_{key}_ms"] = v
    return out


# vLLM's per-request lists, in its order
LIST_KEYS = ("input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times", "queue_times",
             "generated_texts", "errors")


def per_request_lists(t: Tally, keys=LIST_KEYS) -> dict:
    """vLLM's per-request lists named in ``keys``, in seconds (start_times on the perf_counter
    clock), in the run's order; failed requests report 0 / empty, as in vLLM. Only the lists
    asked for are built: at 500k requests ``itls`` alone is millions of floats."""
    c, idx = t.col, t.indices()
    ok = c["status"][idx] == OK
    sent, events = c["sent_ns"][idx], c["events"][idx]
    make = {
        "input_lens": lambda: c["prompt_len"][idx].tolist(),
        "output_lens": lambda: np.where(ok, c["output_tokens"][idx], 0).tolist(),
        "ttfts": lambda: (np.where(ok & (events > 0), c["first_ns"][idx] - sent, 0) / NS_PER_S).tolist(),
        "itls": lambda: [[g / NS_PER_S for g in itl_ns(t.record(int(i)))] if good else []
                         for i, good in zip(idx, ok)],
        "latencies": lambda: (np.where(ok, np.where(events > 0, c["last_ns"][idx], c["done_ns"][idx]) - sent, 0)
                              / NS_PER_S).tolist(),
        "start_times": lambda: (sent / NS_PER_S).tolist(),
        "queue_times": lambda: ((sent - c["dispatched_ns"][idx]) / NS_PER_S).tolist(),
        "generated_texts": lambda: [t.texts.get(int(i), "") for i in idx],
        "errors": lambda: [t.errors.get(int(i)) or "" for i in idx],
    }
    return {k: make[k]() for k in LIST_KEYS if k in keys}


def build_result(*, head: dict, summary: Summary, tally: Tally, selected: list[str],
                 save_detailed: bool, extra: dict) -> dict:
    """``head``: date/backend/label/model_id/... in vLLM's order; ``extra``: ours."""
    s = summary
    result = dict(head)
    result.update({
        "duration": s.duration_s, "completed": s.completed, "failed": s.failed,
        "total_input_tokens": s.total_input, "total_output_tokens": s.total_output,
        "request_throughput": s.request_throughput, "request_goodput": s.request_goodput,
        "output_throughput": s.output_throughput, "total_token_throughput": s.total_token_throughput,
    })
    kept = LIST_KEYS if save_detailed else [k for k in LIST_KEYS if k not in DETAILED_KEYS]
    result.update(per_request_lists(tally, kept))
    result.update({"max_output_tokens_per_s": s.max_output_tokens_per_s,
                   "max_concurrent_requests": s.max_concurrent_requests, "rtfx": 0.0})
    result.update(metric_keys(s, selected))
    result["servelab"] = extra
    return result


def write_result(result: dict, path: Path, append: bool) -> None:
    with open(path, "a+" if append else "w", encoding="utf-8") as f:
        if append and f.tell() != 0:
            f.write("\n")
        json.dump(_finite(result), f)


def record_dict(r: RequestRecord, t0_ns: int) -> dict:
    """One JSONL line: every instant in ms from t0, plus the derived latencies."""
    ms = lambda t: round((t - t0_ns) / NS_PER_MS, 4)  # noqa: E731
    return {
        "request_id": r.request_id, "prompt_len": r.prompt_len, "expected_output_len": r.expected_output_len,
        "prompt_len_source": r.prompt_len_source,
        "output_tokens": r.output_tokens, "output_tokens_source": r.output_tokens_source,
        "intended_send_ms": ms(r.intended_ns), "dispatched_ms": ms(r.dispatched_ns),
        "sent_ms": ms(r.sent_ns), "done_ms": ms(r.done_ns),
        "schedule_lag_ms": r.lag_ns / NS_PER_MS, "client_queue_ms": r.queue_ns / NS_PER_MS,
        "ttft_ms": r.ttft_ns / NS_PER_MS if r.success else None,
        "e2el_ms": r.e2el_ns / NS_PER_MS if r.success else None,
        "token_ms": [ms(t) for t in r.token_ns], "token_counts": list(r.token_counts),
        "error": r.error, "http_status": r.http_status, "finished": r.finished,
        **_turn_keys(r), **_reasoning_keys(r),
    }


def _turn_keys(r: RequestRecord) -> dict:
    """Multi-turn records say which conversation and turn they were (0-based)."""
    return {} if r.turn is None else {"conversation_id": r.conversation_id, "turn": r.turn}


def _reasoning_keys(r: RequestRecord) -> dict:
    """Only for streams that carried reasoning: when it began and when the answer did."""
    if not r.first_reasoning_ns:
        return {}
    answer = (r.first_answer_ns - r.sent_ns) / NS_PER_MS if r.first_answer_ns else None
    return {"ttft_reasoning_ms": (r.first_reasoning_ns - r.sent_ns) / NS_PER_MS, "ttft_answer_ms": answer}


def write_records(records: list[RequestRecord], t0_ns: int, path: Path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(record_dict(r, t0_ns)) + "\n")


class RecordsFile:
    """Records appended as they complete, one JSON line each. The final name carries the
    run's date, known only after it, so lines go to a hidden file in ``folder`` first and
    ``close`` gives it its name; ``discard`` removes it (a run that never started)."""

    def __init__(self, folder: str | Path) -> None:
        os.makedirs(folder, exist_ok=True)
        fd, self.tmp = tempfile.mkstemp(prefix=".servelab-", suffix=".records.jsonl.part", dir=folder)
        self.file = os.fdopen(fd, "w", encoding="utf-8", buffering=1 << 16)

    def write(self, r: RequestRecord, t0_ns: int) -> None:
        self.file.write(json.dumps(record_dict(r, t0_ns)) + "\n")

    def close(self, path: Path) -> None:
        self.file.close()
        os.chmod(self.tmp, 0o644)  # mkstemp's 0600 is for the hidden part; results are shared files
        try:
            os.replace(self.tmp, path)
        except OSError:  # another file system
            shutil.move(self.tmp, path)

    def discard(self) -> None:
        self.file.close()
        Path(self.tmp).unlink(missing_ok=True)


class RecordSink:
    """A bench's ``records.RecordSink``: every record of the run, once, as it is made — by
    this process's run or returned by a worker or a Ray shard — into the run's ``tally``
    (what the summary and the result are computed from) and, when the run is saved, the
    records file. Whoever made it reads ``tally`` after the run."""

    def __init__(self, tally: Tally, file: RecordsFile | None = None) -> None:
        self.tally, self.file = tally, file

    def add(self, i: int, r: RequestRecord, t0_ns: int) -> None:
        self.tally.add(i, r)
        if self.file is not None:
            self.file.write(r, t0_ns)


def records_path(result_path: Path, date: str, append: bool) -> Path:
    """Beside the result; with --append-result one file per run, by date."""
    stem = result_path.with_suffix("")
    return Path(f"{stem}.{date}.records.jsonl" if append else f"{stem}.records.jsonl")


def _finite(obj):
    """JSON has no NaN/inf: write them as null (vLLM writes invalid JSON here)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj
