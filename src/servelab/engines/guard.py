"""No engine outlives servelab.

Four layers, because each one misses a case the next one catches:

1. ``Engine.stop()`` on leaving the ``with`` block — exceptions and Ctrl-C.
2. ``sigterm_as_interrupt()`` (the CLI installs it) — turns SIGTERM, which would
   otherwise end Python without unwinding, into ``Terminated`` so (1) runs.
3. ``atexit`` — an engine started without ``with`` and never stopped.
4. A watchdog process per engine, in its own session, reading a pipe from us:
   if the pipe closes without a goodbye, servelab died (SIGKILL, OOM killer, a
   crash in C), and the watchdog SIGTERMs then SIGKILLs the engine's group.
   (PR_SET_PDEATHSIG in the engine, see process.py, is a fifth, narrower net.)
"""

from __future__ import annotations

import atexit
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

# Runs with -I -S (no site, ~15 ms to start); stdlib only. Ignores SIGINT so a
# Ctrl-C to servelab's terminal reaches servelab, which stops the engine itself.
_WATCHDOG = r"""
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
pgid, grace = int(sys.argv[1]), float(sys.argv[2])
if sys.stdin.buffer.read(1):
    sys.exit(0)  # goodbye: servelab stopped the engine itself
for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
    try:
        os.killpg(pgid, sig)
    except OSError:
        sys.exit(0)
    end = time.monotonic() + wait
    while time.monotonic() < end:
        time.sleep(0.1)
        try:
            os.killpg(pgid, 0)
        except OSError:
            sys.exit(0)
"""


class Terminated(KeyboardInterrupt):
    """servelab got SIGTERM. A KeyboardInterrupt, so every Ctrl-C path also handles it."""


def start_watchdog(pgid: int, grace_s: float) -> subprocess.Popen:
    """A process that kills group ``pgid`` if we die without calling ``dismiss``."""
    return subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", _WATCHDOG, str(pgid), str(grace_s)],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,  # out of our group: a signal to servelab's group spares it
    )


def dismiss(watchdog: subprocess.Popen) -> None:
    """Tell the watchdog the engine is stopped, and reap it."""
    try:
        watchdog.stdin.write(b"x")
        watchdog.stdin.close()
    except (OSError, ValueError):  # it died already (broken pipe) or we closed the pipe
        pass
    try:
        watchdog.wait(timeout=2)
    except subprocess.TimeoutExpired:
        watchdog.kill()
        watchdog.wait()


class _Stoppable(Protocol):
    def stop(self) -> None: ...


_live: set[_Stoppable] = set()
_lock = threading.Lock()


def track(engine: _Stoppable) -> None:
    with _lock:
        if not _live:
            atexit.register(_stop_all)
        _live.add(engine)


def untrack(engine: _Stoppable) -> None:
    with _lock:
        _live.discard(engine)


def _stop_all() -> None:
    for engine in list(_live):
        try:
            engine.stop()
        except Exception as exc:  # at exit, one engine's failure must not spare the others
            print(f"servelab: {exc}", file=sys.stderr)


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While inside, SIGTERM raises ``Terminated`` (main thread only; else a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raise_terminated(signum, frame) -> None:
    raise Terminated()


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM while inside and deliver them after, so a second Ctrl-C
    cannot cut a stop in half and leave an engine behind.

    Swaps the Python handlers rather than masking: with other threads alive the
    kernel would hand a masked signal to one of them and Python would still raise.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    held = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, lambda signum, frame: caught.append(signum)) for sig in held}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        if caught:
            signal.raise_signal(caught[0])  # now, to whatever handler was there before
