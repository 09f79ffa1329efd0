"""Record one run's timeline: the scraper process plus the client's in-loop sampler.

    with Recorder(base_url + "/metrics", interval_s=0.25, folder=records_folder) as rec:
        rec.start()        # early: the scraper's start-up overlaps the dataset's preparation
        ...
        rec.wait_ready()   # before t0: its start-up is off the clock
        run = bench(on_start=rec.on_start)  # at t0, in the client's loop
        timeline = rec.stop(run.outcome.t0_ns, run.outcome.end_ns)

The scraper writes to a hidden ``.servelab-*.scrape.jsonl`` in ``folder`` — beside the run's
records file — so a run killed hard (SIGKILL: no ``stop``, no clean-up) leaves its engine
samples where ``servelab results recover`` finds them: the records' sidecar names the file
(``recovery()``), and ``recovered_timeline`` rebuilds the timeline from it, the client's view
rebuilt from the records (its sampler's rows lived in the killed process). Without a folder,
or one that cannot be written, the file goes to the system's temp folder (not recoverable).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from servelab.records import RequestRecord
from servelab.telemetry import timeline as tl
from servelab.telemetry.client import ClientSampler
from servelab.telemetry.summary import summarize

READY_TIMEOUT_S = 15.0  # imports and a first scrape, on a loaded 2-core machine


SCRAPE_PREFIX, SCRAPE_SUFFIX = ".servelab-", ".scrape.jsonl"


class Recorder:
    def __init__(self, metrics_url: str, interval_s: float = 0.25, gpu: bool = True, insecure: bool = False,
                 folder: Path | None = None) -> None:
        self.metrics_url, self.interval_s, self.gpu, self.insecure = metrics_url, interval_s, gpu, insecure
        self.client = ClientSampler(interval_s)
        self._dir: Path | None = None  # a temp folder of our own, removed at close
        self.scrape = _scrape_file(folder) if folder is not None else None
        if self.scrape is None:
            self._dir = Path(tempfile.mkdtemp(prefix="servelab-telemetry-"))
            self.scrape = self._dir / "scrape.jsonl"
        self._err = self.scrape.with_name(self.scrape.name + ".err")
        self._proc: subprocess.Popen | None = None
        self._tail = (0, None)  # (bytes of the scrape file read, the latest engine sample in them)

    def recovery(self) -> dict | None:
        """What the records' sidecar keeps for ``recovered_timeline``; None when the scrape file
        is in a temp folder (nothing a recovery would find)."""
        if self._dir is not None:
            return None
        return {"scrape_file": self.scrape.name, "interval_s": self.interval_s, "metrics_url": self.metrics_url}

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> None:
        """Launch the scraper; it starts sampling once its imports are done."""
        cmd = [sys.executable, "-m", "servelab.telemetry.scrape", self.metrics_url,
               str(self.scrape), "--interval", str(self.interval_s)]
        cmd += ["--no-gpu"] if not self.gpu else []
        cmd += ["--insecure"] if self.insecure else []
        with open(self._err, "wb") as err:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> bool:
        """Wait until the scraper says it is sampling. False if it never did (the run goes on)."""
        if self._proc is None:
            return False
        ready, _, _ = select.select([self._proc.stdout], [], [], timeout_s)
        return bool(ready) and self._proc.stdout.readline().strip() == b"ready"

    def on_start(self, counters) -> None:
        self.client.start(counters)

    def latest(self) -> dict | None:
        """The engine's latest sample so far (a live view's; None before the first), read
        from where the last call stopped, so each call costs only the new lines."""
        read, last = self._tail
        try:
            with open(self.scrape, "rb") as f:
                f.seek(read)
                new = f.read()
        except OSError:
            return last
        whole = new[: new.rfind(b"\n") + 1]  # a line still being written waits for the next call
        for line in whole.splitlines():
            if b'"src": "engine"' in line:
                try:
                    last = json.loads(line)
                except ValueError:
                    continue
        self._tail = (read + len(whole), last)
        return last

    def stop(self, t0_ns: int, end_ns: int) -> tl.Timeline:
        """Stop the scraper, merge its samples with the client's, clean up."""
        self._end_scraper()
        raw = read_lines(self.scrape) + self.client.samples()
        timeline = tl.build(raw, t0_ns, end_ns, self.interval_s, self.metrics_url)
        failure = _read_text(self._err)
        if failure and not any(x["src"] == "meta" for x in raw):
            timeline.header["engine"]["detail"] = "scraper failed: " + failure.strip().splitlines()[-1]
        self.close()
        return timeline

    def _end_scraper(self) -> None:
        """Closing its stdin is the stop signal; kill only if it does not listen."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.stdin.close()
        try:  # its closing sample may take a whole scrape timeout (4 intervals) and a GPU query
            proc.wait(timeout=max(5.0, 4 * self.interval_s + 2.0))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()

    def close(self) -> None:
        self._end_scraper()
        self.scrape.unlink(missing_ok=True)
        self._err.unlink(missing_ok=True)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)


def _scrape_file(folder: Path) -> Path | None:
    """A new hidden scrape file in ``folder``; None when the folder cannot be written (the run's
    own check of its results folder says so in one line, later)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, path = tempfile.mkstemp(prefix=SCRAPE_PREFIX, suffix=SCRAPE_SUFFIX, dir=folder)
    except OSError:
        return None
    os.close(fd)
    return Path(path)


def recovered_timeline(recovery: dict, folder: Path, records: list[RequestRecord], t0_perf_ns: int,
                       end_ns: int) -> tl.Timeline | None:
    """A killed run's timeline: its scraper's file (named by ``recovery``, in ``folder``) and the
    client's view rebuilt from its records (instants in ns from t0, as results/recover.py reads
    them) on the sampler's ticks; ``end_ns`` from t0. None when the scrape file is gone."""
    scrape = folder / str(recovery.get("scrape_file", ""))
    if not recovery.get("scrape_file") or not scrape.is_file():
        return None
    interval_s = float(recovery.get("interval_s") or 0.25)
    timeline = tl.build(read_lines(scrape), t0_perf_ns, t0_perf_ns + end_ns, interval_s, recovery.get("metrics_url"))
    step = max(1, round(interval_s * 1e9))
    timeline.samples = sorted(timeline.samples + tl.client_samples(records, 0, range(0, end_ns + step, step)),
                              key=lambda x: x["t_ms"])
    timeline.header["client"] = {"status": "ok", "detail": "rebuilt from the records: the run was killed, and its "
                                                           "sampler's rows (and client CPU) with it"}
    return timeline


def recover_into(header: dict, folder: Path, records: list[RequestRecord], end_ns: int, result_path: Path,
                 date: str) -> dict | None:
    """``results recover``'s hook: a killed run's timeline, written where the run would have
    written it (beside its result) and its scrape file removed; the result's telemetry section,
    or None when the run left none (telemetry off, a temp folder, or a run from before this)."""
    recovery, t0 = header.get("telemetry") or {}, header.get("t0_perf_ns")
    timeline = recovered_timeline(recovery, folder, records, int(t0), end_ns) if t0 is not None else None
    if timeline is None:
        return None
    path = tl.timeline_path(result_path, date, bool(header.get("append")))
    tl.write(timeline, path)
    scrape = folder / recovery["scrape_file"]
    scrape.unlink(missing_ok=True)
    scrape.with_name(scrape.name + ".err").unlink(missing_ok=True)
    return {"timeline_file": str(path), **summarize(timeline)}


def read_lines(path: Path) -> list[dict]:
    """The scraper's lines (a line cut short by a kill is left out)."""
    out = []
    for line in _read_text(path).splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a line cut short by a kill
    return out


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def metrics_url(base_url: str) -> str:
    return base_url.rstrip("/") + "/metrics"

