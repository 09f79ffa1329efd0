"""A progress line for the run, drawn by a timer, never by the request path.

On a terminal it redraws in place twice a second; in a log (CI) it writes a
line every ten seconds. It only reads ``Counters``.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time

from servelab.loadgen.pacer import Counters


class Progress:
    """``start(counters)`` at t0 draws until ``stop()``, from a thread of its own (the run's
    event loop, or its workers', never waits on it): a bench's display when the live panel
    (loadgen/live.py) is not shown."""

    def __init__(self, total: int, label: str = "bench", stream=None, until_s: float | None = None) -> None:
        # sys.stderr as it is now, not as it was at import (a default argument would keep a
        # stream that a caller, or a test's capture, has since closed)
        stream = stream if stream is not None else sys.stderr
        self.total, self.label, self.stream, self.until_s = total, label, stream, until_s
        self.tty = stream.isatty()
        self.counters: Counters | None = None
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    def start(self, counters: Counters) -> None:
        self.counters, self._t0 = counters, time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="servelab-progress", daemon=True)
        self._thread.start()

    def line(self) -> str:
        c = self.counters
        elapsed = time.monotonic() - self._t0
        return (f"[{self.label}] {how_far(c.done, self.total, self.until_s, elapsed, ' done')} · {c.in_flight} in "
                f"flight · {c.failed} failed · {elapsed:.1f} s")

    def _loop(self) -> None:
        period = 0.5 if self.tty else 10.0
        while not self._done.wait(period):
            self._draw()

    def _draw(self, end: str = "") -> None:
        if self.tty:
            self.stream.write("\r\x1b[2K" + self.line() + end)
        else:
            self.stream.write(self.line() + "\n")
        self.stream.flush()

    def stop(self) -> None:
        if self._thread is not None:
            self._done.set()
            self._thread.join()
            self._thread = None
            self._draw("\n" if self.tty else "")


@contextlib.contextmanager
def elapsed(label: str, stream=None, after_s: float = 2.0):
    """Show that a slow step (loading a dataset, tokenizing) is alive: on a terminal,
    once it has taken ``after_s``, "[label] 3.5 s" redrawn twice a second by a
    thread, erased when the step ends. In a log, nothing: the step's result says it."""
    stream = stream or sys.stderr
    if not stream.isatty():
        yield
        return
    done, t0 = threading.Event(), time.monotonic()

    def draw() -> None:
        if done.wait(after_s):
            return
        while not done.is_set():
            stream.write(f"\r\x1b[2K[{label}] {time.monotonic() - t0:.1f} s")
            stream.flush()
            done.wait(0.5)
        stream.write("\r\x1b[2K")
        stream.flush()

    painter = threading.Thread(target=draw, name="servelab-elapsed", daemon=True)
    painter.start()
    try:
        yield
    finally:
        done.set()
        painter.join()


def how_far(done: int, total: int, until_s: float | None, elapsed_s: float, said: str = "") -> str:
    """The run's progress: requests done of those meant, or, where lanes take sessions until a
    minimum duration (``until_s``: --agentic-locked with --max-sessions, whose requests meant are
    known only at the end), the requests done and that time's share gone."""
    if until_s is not None:
        pct = min(100.0, 100.0 * elapsed_s / until_s) if until_s > 0 else 100.0
        return f"{done:,}{said} · taking sessions for {until_s:g} s ({pct:.0f}%)"
    pct = 100.0 * done / total if total else 100.0
    return f"{done:,}/{total:,}{said} ({pct:.0f}%)"
