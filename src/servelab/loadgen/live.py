"""The run's live panel on a terminal: aligned lines redrawn in place a few times a second.

It lives on its own thread and only reads: the client's ``Counters`` (a client
worker's or Ray shard's rows too, ``shards.Live``), per request either the run's
glance (loadgen/glance.py: TTFT and output tokens read off each raw response in a
few microseconds, no parse) or, where the run takes none (client workers, Ray shards,
multi-turn), the tally's numpy columns for the records made so far, and the engine's
latest sample that the telemetry scraper already wrote. The request path never waits
on it. A redraw holds the GIL ~0.1 ms (``frame``).

What the panel cost before the glance was the records it asked for within a second
of each response: parsed during the run rather than after it, on the
event loop. ``selftest --concurrency 512``, on against off (docs/design.md, "The live
panel's cost"): +0.2 ms on mean TTFT, ~+1 ms on event delivery p99, +0.15 of a core.
With the glance a short run again parses its responses after it ends, and with the
frame written in ANSI codes (not rich: ~0.56 ms of the GIL a redraw, +0.45 ms on event
delivery p99) the panel is within the off runs' own spread: +0.2 ms event delivery p99,
+0.04 ms mean TTFT, the same CPU.
Percentiles above ``EXACT_UP_TO`` requests are over an even stride of them (marked ≈):
a sort of 500,000 values four times a second would hold the GIL for tens of ms.

On when stderr is a terminal, or forced with ``SERVELAB_LIVE=1`` (a test in tmux,
a log that wants the table); ``SERVELAB_LIVE=0`` or ``--disable-tqdm`` turn it off,
and the plain progress line (loadgen/progress.py) is drawn instead.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import deque

import numpy as np

from servelab.clock import cpu_s
from servelab.loadgen.glance import Glance
from servelab.loadgen.pacer import Counters
from servelab.loadgen.progress import how_far
from servelab.loadgen.shards import LIVE_FIELDS, Live
from servelab.metrics.tally import OK

REFRESH_HZ = 4
EXACT_UP_TO = 65_536  # requests over which percentiles are exact; past it, an even stride
BOLD, PLAIN = "\x1b[1m", "\x1b[0m"
NOW_WINDOW_S = 2.0  # "output tok/s now": tokens of the requests answered in the last 2 s


def wanted(stream=None) -> bool:
    """Whether a run shows the panel: ``SERVELAB_LIVE`` decides when set, else a terminal."""
    forced = forced_to()
    return (stream or sys.stderr).isatty() if forced is None else forced


def forced_to() -> bool | None:
    """``SERVELAB_LIVE``: True (1, on, yes…), False (0, off, no), None when unset."""
    value = os.environ.get("SERVELAB_LIVE", "").strip().lower()
    return None if not value else value not in ("0", "off", "no", "false")


class Panel:
    """``start(counters)`` at t0 draws until ``stop()``; ``tally``: the run's (its columns);
    ``engine()``: the engine's latest sample as a dict, or None."""

    def __init__(self, total: int, label: str = "bench", tally=None, engine=None, stream=None,
                 glance: Glance | None = None, until_s: float | None = None) -> None:
        self.total, self.label, self.tally, self.engine, self.glance = total, label, tally, engine, glance
        self.until_s = until_s  # lanes take sessions this long: progress is its time (loadgen/progress.how_far)
        self.stream = stream or sys.stderr
        self.counters: Counters | None = None
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = time.monotonic()
        self._cpu = (self._t0, cpu_s())
        self._tokens: deque[tuple[float, int]] = deque()  # (when, tokens so far), the last NOW_WINDOW_S
        self._lock = threading.Lock()  # one writer at a time on the terminal: the redraw or a print above
        self._lines: list[str] = []  # the frame on screen
        self._swapped: list[tuple[str, object]] = []  # (sys attribute, the stream it held) while drawing

    def start(self, counters: Counters) -> None:
        self.counters, self._t0 = counters, time.monotonic()
        self._cpu = (self._t0, cpu_s())
        self._print_above()
        self._thread = threading.Thread(target=self._draw, name="servelab-live", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        for name, stream in reversed(self._swapped):
            above = getattr(sys, name)
            if isinstance(above, _Above):
                above.flush_pending()
                setattr(sys, name, stream)
        self._swapped.clear()

    def _print_above(self) -> None:
        """While the panel draws, what the run prints to this terminal (stderr; stdout when it
        is one) goes above the frame, a whole line at a time, instead of under the next one."""
        for name in ("stderr", "stdout"):
            stream = getattr(sys, name)
            if stream is self.stream or (_isatty(stream) and _isatty(self.stream)):
                self._swapped.append((name, stream))
                setattr(sys, name, _Above(self, stream))

    def _draw(self) -> None:
        """Redraw in place: the cursor back up over the last frame, each line rewritten and
        cleared to its end, whatever is below the frame cleared; the last state stays, whole."""
        while True:
            done = self._done.wait(1.0 / REFRESH_HZ)
            width, height = _size(self.stream)
            lines = self.frame(width, 0 if done else height)
            with self._lock:
                self._write_frame(lines)
            if done:
                return

    def _write_frame(self, lines: list[str]) -> None:
        _write_once(self.stream, self._erase() + "".join(f"{line}\x1b[K\n" for line in lines) + "\x1b[J")
        self._lines = lines

    def _erase(self) -> str:
        return f"\x1b[{len(self._lines)}F" if self._lines else ""

    def above(self, stream, text: str) -> None:
        """``text`` (whole lines) written to ``stream`` above the frame, the frame drawn again under it."""
        with self._lock:
            if not self._lines:
                stream.write(text)
                stream.flush()
                return
            lines, erase = self._lines, self._erase()
            _write_once(self.stream, erase + "\x1b[J")
            stream.write(text)
            stream.flush()
            self._lines = []  # the text now stands where the frame was: drawn again under it
            self._write_frame(lines)

    def frame(self, width: int = 0, height: int = 0) -> list[str]:
        """The panel as it is now, a string per line: its rows aligned, the names bold (ANSI),
        each cut to ``width`` columns (0: not cut) rather than wrapped, and fewer lines than
        ``height`` (0: all; a frame taller than the terminal could not be drawn over).

        Written with ANSI codes, not rich: a redraw holds the GIL, and rich's Text and render
        took ~0.56 ms of it against ~0.1 ms, which showed on event delivery p99 at 512
        streams (docs/design.md, "The live panel's cost")."""
        rows = self.rows()
        name_width = max(len(name) for name, _ in rows)
        lines = [_cut(f"servelab {self.label} · {time.monotonic() - self._t0:.1f} s", width)]
        for name, value in rows:
            plain = _cut(f"{name.ljust(name_width)}  {value}", width)
            lines.append(f"{BOLD}{plain[:name_width]}{PLAIN}{plain[name_width:]}")
        if height > 2 and len(lines) > height - 1:
            shown = height - 2
            lines = lines[:shown] + [_cut(f"… {len(lines) - shown} more lines (a taller terminal shows them)", width)]
        return lines

    def rows(self) -> list[tuple[str, str]]:
        """(name, value) lines, in order: what the view shows, as plain text."""
        c = self.counters or Counters()
        rows = [("progress", how_far(c.done, self.total, self.until_s, time.monotonic() - self._t0)),
                ("requests", f"sent {c.dispatched:,} · in flight {c.in_flight:,} · finished {c.done - c.failed:,} "
                             f"· failed {c.failed:,}")]
        rows += self._record_rows()
        rows.append(("engine", self._engine_line()))
        rows.append(("client CPU", self._cpu_line(c)))
        if isinstance(c, Live) and len(c.arrays) > 1:
            rows += [(f"  worker {i}", _worker_line(list(a))) for i, a in enumerate(c.arrays)]
        return rows

    def _columns(self):
        """(how many, what they are, OK indices, TTFT ms of the picked, tokens by index): from
        the glance when the run takes one, else from the records made so far; None: neither."""
        if self.glance is not None:
            seen, ok, ttft_ms, tokens = self.glance.columns()
            return seen, "answered", ok, lambda pick: ttft_ms[pick].astype(np.float64), tokens
        if self.tally is None:
            return None
        col = self.tally.col
        made = int(np.count_nonzero(col["status"]))
        # a record being added on the run's thread has its status before its first token's
        # instant (Tally.add's order): one whose instant is not there yet is left for later
        ok = np.flatnonzero((col["status"] == OK) & (col["first_ns"] > 0))
        return (made, "records made", ok, lambda pick: (col["first_ns"][pick] - col["sent_ns"][pick]) / 1e6,
                col["output_tokens"])

    def _record_rows(self) -> list[tuple[str, str]]:
        columns = self._columns()
        if columns is None:
            return []
        made, what, ok, ttft_of, tokens_by = columns
        tokens = int(tokens_by[ok].sum())
        elapsed = max(time.monotonic() - self._t0, 1e-9)
        rows = [("output tok/s", f"now {self._tokens_now(tokens):,.0f} · so far {tokens / elapsed:,.0f} "
                                 f"({made:,} {what})")]
        if len(ok) == 0:
            return rows + [("TTFT", "none answered yet" if self.glance is not None else "no records yet")]
        exact = len(ok) <= EXACT_UP_TO
        pick = ok if exact else ok[:: -(-len(ok) // EXACT_UP_TO)]
        ttft = ttft_of(pick)
        p50, p99 = np.percentile(ttft, (50, 99))
        mark = "" if exact else "≈ "
        return rows + [("TTFT", f"{mark}p50 {p50:,.1f} ms · p99 {p99:,.1f} ms (so far)")]

    def _tokens_now(self, tokens: int) -> float:
        """Tokens per second over the last NOW_WINDOW_S of redraws."""
        now = time.monotonic()
        self._tokens.append((now, tokens))
        while len(self._tokens) > 1 and now - self._tokens[0][0] > NOW_WINDOW_S:
            self._tokens.popleft()
        (t_old, k_old) = self._tokens[0]
        return (tokens - k_old) / (now - t_old) if now > t_old else 0.0

    def _engine_line(self) -> str:
        sample = self.engine() if self.engine is not None else None
        if not sample:
            return "no sample (telemetry off, or none yet)"
        if "error" in sample:
            return f"scrape failed: {sample['error']}"
        kv = sample.get("kv_usage")
        return (f"running {_count(sample.get('running'))} · waiting {_count(sample.get('waiting'))} · "
                f"KV {'—' if kv is None else f'{100 * kv:.0f}%'}")

    def _cpu_line(self, c: Counters) -> str:
        if isinstance(c, Live) and c.arrays:
            return f"busiest worker {c.cpu_s:.1f} s"
        now, cpu = time.monotonic(), cpu_s()
        (t_old, cpu_old), self._cpu = self._cpu, (now, cpu)
        busy = (cpu - cpu_old) / (now - t_old) if now > t_old else 0.0
        return f"{100 * busy:.0f}% of a core now · {cpu:.1f} s (this process, the panel included)"


class _Above:
    """A stream whose whole lines the panel writes above its frame (``Panel.above``); a line's
    start is held until its end comes, or until the panel stops."""

    def __init__(self, panel: Panel, stream) -> None:
        self._panel, self._stream, self._pending = panel, stream, ""

    def write(self, text: str) -> int:
        self._pending += text
        if "\n" in self._pending:
            whole, self._pending = self._pending.rsplit("\n", 1)
            self._panel.above(self._stream, whole + "\n")
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def flush_pending(self) -> None:
        if self._pending:
            self._panel.above(self._stream, self._pending)
            self._pending = ""

    def __getattr__(self, name):  # isatty, fileno, encoding…: the stream's own
        return getattr(self._stream, name)


def _write_once(stream, text: str) -> None:
    """``text`` in one write to the stream's file where it has one. stderr is line-buffered:
    written through it, a frame is a write call per line, and each one gives up the GIL and
    takes it back from the event loop's thread. (Against per-line writes at 512 streams, five
    runs each on a busy machine could not tell the two apart: event delivery p99 2.7 against
    3.0 ms, the panel off 2.1 ms.)"""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        stream.write(text)
        stream.flush()
        return
    stream.flush()  # what was written through the stream goes first
    data = memoryview(text.encode(getattr(stream, "encoding", None) or "utf-8", "replace"))
    while data:
        data = data[os.write(fd, data):]


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _size(stream) -> tuple[int, int]:
    """The terminal's (columns, lines); (0, 0) when the stream is not one: nothing is cut."""
    try:
        size = os.get_terminal_size(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return 0, 0
    return size.columns, size.lines


def _cut(line: str, width: int) -> str:
    return line if width <= 0 or len(line) < width else line[:max(width - 2, 0)] + "…"


def _worker_line(row: list[int]) -> str:
    w = dict(zip(LIVE_FIELDS, row))
    return (f"sent {w['dispatched']:,} · in flight {w['in_flight']:,} · done {w['done']:,} · "
            f"failed {w['failed']:,} · lag {w['lag_ns'] / 1e6:.1f} ms · CPU {w['cpu_ns'] / 1e9:.1f} s")


def _count(value) -> str:
    return "—" if value is None else f"{value:.0f}"
