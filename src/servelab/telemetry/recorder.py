"""Record one run's timeline: the scraper process plus the client's in-loop sampler.

    with Recorder(base_url + "/metrics", interval_s=0.25) as rec:
        rec.start()        # early: the scraper's start-up overlaps the dataset's preparation
        ...
        rec.wait_ready()   # before t0: its start-up is off the clock
        run = bench(on_start=rec.on_start)  # at t0, in the client's loop
        timeline = rec.stop(run.outcome.t0_ns, run.outcome.end_ns)
"""

from __future__ import annotations

import json
import select
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from servelab.telemetry import timeline as tl
from servelab.telemetry.client import ClientSampler

READY_TIMEOUT_S = 15.0  # imports and a first scrape, on a loaded 2-core machine


class Recorder:
    def __init__(self, metrics_url: str, interval_s: float = 0.25, gpu: bool = True, insecure: bool = False) -> None:
        self.metrics_url, self.interval_s, self.gpu, self.insecure = metrics_url, interval_s, gpu, insecure
        self.client = ClientSampler(interval_s)
        self._dir = Path(tempfile.mkdtemp(prefix="servelab-telemetry-"))
        self._proc: subprocess.Popen | None = None
        self._tail = (0, None)  # (bytes of scrape.jsonl read, the latest engine sample in them)

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> None:
        """Launch the scraper; it starts sampling once its imports are done."""
        cmd = [sys.executable, "-m", "servelab.telemetry.scrape", self.metrics_url,
               str(self._dir / "scrape.jsonl"), "--interval", str(self.interval_s)]
        cmd += ["--no-gpu"] if not self.gpu else []
        cmd += ["--insecure"] if self.insecure else []
        with open(self._dir / "scrape.err", "wb") as err:
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
            with open(self._dir / "scrape.jsonl", "rb") as f:
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
        raw = _read_lines(self._dir / "scrape.jsonl") + self.client.samples()
        timeline = tl.build(raw, t0_ns, end_ns, self.interval_s, self.metrics_url)
        failure = _read_text(self._dir / "scrape.err")
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
        shutil.rmtree(self._dir, ignore_errors=True)


def _read_lines(path: Path) -> list[dict]:
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

