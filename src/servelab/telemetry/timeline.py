"""One run's timeline: engine, GPU and client samples on one clock.

On disk (``<result>.timeline.jsonl``): a header line, then one sample per line,
ordered by time. ``t_ms`` is milliseconds from the run's t0 (the first request's
intended send), so samples before the run have negative times::

    {"servelab_timeline": 1, "t0_ns": …, "duration_s": 41.2, "interval_s": 0.25,
     "metrics_url": "http://…/metrics", "engine": {"status": "ok", "names": {…}, …},
     "gpu": {"status": "absent", "detail": "NVML unavailable (…)", "devices": []}}
    {"t_ms": 12.5, "src": "engine", "running": 2.0, "waiting": 14.0, "kv_usage": 0.01, …}
    {"t_ms": 13.1, "src": "client", "in_flight": 16, "waiting": 0, "lag_ms": 0.02, "cpu": 0.11, …}
    {"t_ms": 13.4, "src": "gpu", "devices": [{"util": 97, "power_w": 612.0, …}]}

An engine sample that failed carries ``error`` instead of values.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from servelab.errors import InputError

VERSION = 1


@dataclass(slots=True)
class Timeline:
    header: dict
    samples: list[dict] = field(default_factory=list)

    @property
    def duration_ms(self) -> float:
        return float(self.header.get("duration_s") or 0.0) * 1000.0

    def of(self, src: str) -> list[dict]:
        """Good samples from one source (failed scrapes left out), in time order."""
        return [s for s in self.samples if s["src"] == src and "error" not in s]

    def during(self, src: str) -> list[dict]:
        """Good samples inside the run, ``0 <= t_ms <= duration``."""
        end = self.duration_ms
        return [s for s in self.of(src) if 0.0 <= s["t_ms"] <= end]

    def status(self, src: str) -> str:
        return (self.header.get(src) or {}).get("status", "absent")


def build(raw: list[dict], t0_ns: int, end_ns: int, interval_s: float, metrics_url: str | None) -> Timeline:
    """Merge the scraper's lines and the client's samples (all stamped ``t_ns``)."""
    header = {"servelab_timeline": VERSION, "t0_ns": t0_ns, "duration_s": (end_ns - t0_ns) / 1e9,
              "interval_s": interval_s, "metrics_url": metrics_url,
              "engine": _engine_header(raw), "gpu": _gpu_header(raw), "client": {"status": "ok"}}
    samples = []
    for line in sorted((x for x in raw if x["src"] in ("engine", "gpu", "client")), key=lambda x: x["t_ns"]):
        sample = {k: v for k, v in line.items() if k != "t_ns"}
        samples.append({"t_ms": round((line["t_ns"] - t0_ns) / 1e6, 3), **sample})
    return Timeline(header, samples)


def client_samples(records, t0_ns: int, ticks) -> list[dict]:
    """The client's view at each tick (ns from t0), from records alone: in flight = sent and not
    done, waiting = dispatched and not sent. For runs whose sampler did not run (a simulated run)
    or whose rows were lost (a run killed hard): no CPU or lag, and a request without a record
    (cut by a kill) is not counted."""
    sent = sorted(r.sent_ns - t0_ns for r in records)
    done = sorted(r.done_ns - t0_ns for r in records)
    dispatched = sorted(r.dispatched_ns - t0_ns for r in records)
    out = []
    for t in ticks:
        n_sent, n_done = bisect_right(sent, t), bisect_right(done, t)
        out.append({"t_ms": round(t / 1e6, 3), "src": "client", "in_flight": n_sent - n_done,
                    "waiting": bisect_right(dispatched, t) - n_sent})
    return out


def _engine_header(raw: list[dict]) -> dict:
    meta = [x for x in raw if x["src"] == "engine-meta"]
    errors = Counter(x["error"] for x in raw if x["src"] == "engine" and "error" in x)
    if not meta:
        detail = errors.most_common(1)[0][0] if errors else "never scraped"
        return {"status": "absent", "detail": detail}
    last = meta[-1]
    return {"status": "ok", "names": last["names"], "cache_config": last["cache_config"],
            "failed_scrapes": sum(errors.values())}


def _gpu_header(raw: list[dict]) -> dict:
    meta = next((x for x in raw if x["src"] == "meta"), None)
    if meta is None:
        return {"status": "absent", "detail": "the scraper did not start", "devices": []}
    gpu = meta["gpu"]
    if gpu["status"] == "ok":
        return {"status": "ok", "devices": gpu["devices"]}
    return {"status": "absent", "detail": gpu["status"], "devices": []}


def timeline_path(result_path: Path, date: str, append: bool) -> Path:
    """Beside the result, named like its records file (one per run with --append-result)."""
    stem = Path(result_path).with_suffix("")
    return Path(f"{stem}.{date}.timeline.jsonl" if append else f"{stem}.timeline.jsonl")


def write(timeline: Timeline, path: Path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(timeline.header) + "\n")
        for s in timeline.samples:
            f.write(json.dumps(s) + "\n")


def read(path: Path) -> Timeline:
    try:
        with open(path, encoding="utf-8") as f:
            lines = [json.loads(x) for x in f if x.strip()]
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read timeline {path}: {exc}") from None
    if not lines or not isinstance(lines[0], dict) or "servelab_timeline" not in lines[0]:
        raise InputError(f"{path}: not a servelab timeline (no header line)")
    for number, sample in enumerate(lines[1:], start=2):
        if not (isinstance(sample, dict) and isinstance(sample.get("src"), str)
                and isinstance(sample.get("t_ms"), (int, float))):
            raise InputError(f"{path}: line {number}: a sample needs \"src\" and a numeric \"t_ms\"")
    return Timeline(lines[0], lines[1:])
