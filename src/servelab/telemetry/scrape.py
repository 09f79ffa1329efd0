"""The scraper: a separate process that samples ``/metrics`` and NVML on a timer.

    python -m servelab.telemetry.scrape METRICS_URL OUT_FILE --interval 0.25 [--no-gpu] [--insecure]

Why a process: an engine's ``/metrics`` is a few hundred lines of histograms, and
parsing it in Python holds the interpreter lock for milliseconds — on the
client's event loop (or in a thread of its process) that would delay the very
timestamps we measure. Samples are stamped with ``perf_counter_ns``, which is
CLOCK_MONOTONIC on Linux and macOS and so comparable with the client's clock
across processes.

It writes one JSON object per line to OUT_FILE (``src``: meta, engine-meta,
engine, gpu), prints ``ready`` once its imports and NVML are done and its first sample is
written, and exits when its stdin closes (the parent closing the pipe, or dying),
after one closing sample.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time

from servelab.telemetry import engine
from servelab.telemetry.gpu import open_gpus

_now = time.perf_counter_ns

# How long one scrape may wait for the engine's answer: a starved API server can be silent
# for seconds (2.9 s measured here: the embedded engine at --max-num-seqs 2 under 32 streams,
# two busy loops beside it). A late sample is stamped at its midpoint and still counts; one
# given up at 1 s (the old 4 intervals) is lost, and a run whose scrapes all time out has
# nothing to diagnose from.
TIMEOUT_S = 5.0


class EngineScraper:
    """One GET per sample; a meta line whenever the set of names in use changes."""

    def __init__(self, url: str, timeout_s: float, insecure: bool = False) -> None:
        self.client = engine.MetricsClient(url, timeout_s, insecure)
        self.used: dict[str, str] | None = None

    def sample(self) -> list[dict]:
        t1 = _now()
        try:
            text = self.client.get()
            t2 = _now()
            values, used, cache = engine.sample(text)
        except Exception as exc:  # any failure (a malformed page too) is a data point, never the end
            return [{"src": "engine", "t_ns": t1, "error": engine.describe_error(exc)}]
        # The gauges describe some instant between request and reply: stamp the midpoint.
        lines = [{"src": "engine", "t_ns": (t1 + t2) // 2, "scrape_ms": round((t2 - t1) / 1e6, 3), **values}]
        if used != self.used:
            self.used = used
            lines.insert(0, {"src": "engine-meta", "t_ns": t1, "names": used, "cache_config": cache})
        return lines


def run(scraper: EngineScraper, out, interval_s: float, gpus, stop: threading.Event) -> None:
    """Sample on an absolute schedule until told to stop, then once more: that closing
    sample brackets the run's end, so a counter's increase is whole even when the
    samples inside a short run were few or failed."""
    step = int(interval_s * 1e9)
    due = _now() + step  # the caller took the first sample
    while not stop.wait(max(0.0, (due - _now()) / 1e9)):
        take(scraper, out, gpus)
        due = max(due + step, _now())  # a slow scrape skips, never bunches
    take(scraper, out, gpus)


def take(scraper: EngineScraper, out, gpus) -> None:
    lines = scraper.sample()
    if gpus is not None:
        lines.append({"src": "gpu", "t_ns": _now(), "devices": gpus.sample()})
    out.write("".join(json.dumps(x) + "\n" for x in lines))
    out.flush()


def _wait_for_eof(stop: threading.Event) -> None:
    try:
        sys.stdin.buffer.read()
    finally:
        stop.set()


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    # Ctrl-C in a terminal reaches the whole process group; the parent decides when we stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _leave_client_cpus()
    _yield_cpu()
    stop = threading.Event()
    threading.Thread(target=_wait_for_eof, args=(stop,), daemon=True).start()
    gpus, status = (None, "disabled (--no-gpu)") if args.no_gpu else open_gpus()
    with open(args.out, "a", encoding="utf-8") as out:
        meta = {"src": "meta", "t_ns": _now(), "gpu": {"status": status, "devices": gpus.devices if gpus else []}}
        out.write(json.dumps(meta) + "\n")
        out.flush()
        try:
            scraper = EngineScraper(args.url, max(TIMEOUT_S, 4 * args.interval), args.insecure)
            take(scraper, out, gpus)  # before t0: the baseline a counter's increase starts from
            print("ready", flush=True)
            run(scraper, out, args.interval, gpus, stop)
        finally:
            if gpus is not None:
                gpus.close()
    return 0


def _leave_client_cpus() -> None:
    """A client pinned to some CPUs (``taskset``) keeps them: we inherited its
    affinity, so move to the machine's other CPUs, if there are any we may use."""
    try:
        client = os.sched_getaffinity(0)
        others = set(range(os.cpu_count() or 0)) - client
        if others:
            os.sched_setaffinity(0, others)
    except (AttributeError, OSError):  # no affinity API (macOS), or a cpuset forbids the others
        pass


def _yield_cpu() -> None:
    """Give way to the client and the engine, but keep sampling: a nice of 10 weighs
    ~1/10 of an ordinary task, so a woken client or engine runs first. (SCHED_IDLE, used
    before, starved the scraper outright when both cores of a 2-core machine were busy:
    runs came back with almost no engine samples, and nothing to diagnose from.)"""
    if hasattr(os, "nice"):
        os.nice(10)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m servelab.telemetry.scrape", allow_abbrev=False)
    p.add_argument("url")
    p.add_argument("out")
    p.add_argument("--interval", type=float, default=0.25)
    p.add_argument("--no-gpu", action="store_true")
    p.add_argument("--insecure", action="store_true", help="skip TLS certificate checks")
    return p.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main())
