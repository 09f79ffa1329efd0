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
from pathlib import Path

import numpy as np

from servelab.errors import ServelabError
from servelab.metrics.summary import NS_PER_S, Summary, itl_ns
from servelab.metrics.tally import OK, Tally
from servelab.results.records_file import RecordSink, RecordsFile, record_dict, write_atomic

__all__ = ["RecordSink", "RecordsFile", "record_dict"]  # their home is results/records_file.py

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


def write_result(result: dict, path: Path, append: bool, writer=os.write) -> None:
    """Whole or not at all: a new file by rename; an append cut back to the file's old
    length if it fails (a full disk), so no reader ever sees half a JSON object.
    ``writer``: os.write, or a test's that fails."""
    if not append:
        write_atomic(Path(path), json_chunks(result))
        return
    text = "".join(json_chunks(result))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        old = os.fstat(fd).st_size
        data = memoryview((("\n" if old else "") + text).encode())
        try:
            while data:
                data = data[writer(fd, data):]
            os.fsync(fd)
        except OSError as exc:
            os.ftruncate(fd, old)
            raise ServelabError(f"cannot append the result to {path} ({exc.strerror or exc}); "
                                f"the file is back to its old length ({old} bytes)") from None
    finally:
        os.close(fd)


def records_path(result_path: Path, date: str, append: bool) -> Path:
    """Beside the result; with --append-result one file per run, by date."""
    stem = result_path.with_suffix("")
    return Path(f"{stem}.{date}.records.jsonl" if append else f"{stem}.records.jsonl")


# a list longer than this is encoded a slice at a time (a 500k-request run's per-request lists:
# encoded whole, their text and the encoder's pieces took ~20 MB of its peak)
_SLICE = 10_000


def json_chunks(result: dict):
    """``json.dumps(finite(result))``'s text in pieces, the same characters: a long list in a
    top-level value is encoded a slice at a time, so no copy of it, finite or textual, is whole."""
    yield "{"
    for k, (key, value) in enumerate(result.items()):
        yield (", " if k else "") + json.dumps({key: 0})[1:-4] + ": "  # a key as dumps writes it (1 -> "1")
        if isinstance(value, list) and len(value) > _SLICE:
            yield "["
            for at in range(0, len(value), _SLICE):
                yield (", " if at else "") + json.dumps(finite(value[at:at + _SLICE]))[1:-1]
            yield "]"
        else:
            yield json.dumps(finite(value))
    yield "}"


def finite(obj, as_text: bool = False):
    """The one NaN filter: JSON has no NaN or ±inf, so they become null (a statistic with no
    samples; vLLM writes invalid JSON here). ``as_text``: provenance, a flag's value as given
    (``--request-rate inf``): they become their text ("inf"), and an object JSON has no
    form for its ``str``. Tuples become lists, as json.dumps writes them."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj) if as_text else None
    if isinstance(obj, dict):
        return {k: finite(v, as_text) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v, as_text) for v in obj]
    if as_text and not isinstance(obj, (str, int, float, bool, type(None))):
        return str(obj)
    return obj
