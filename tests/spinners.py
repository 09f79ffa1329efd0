"""Processes that spin on a CPU, for tests of what servelab says about a busy machine:
``child`` is servelab's (started from the test), ``stranger`` is not (its parent exits,
so it belongs to no one in the test's tree)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

SPIN_CODE = "import pathlib, sys; pathlib.Path(sys.argv[1]).touch()\nwhile True: pass"
# a stand-in for an engine started by hand: it listens on a port (written to the flag), and spins
LISTEN_CODE = ("import pathlib, socket, sys; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); "
               "f = pathlib.Path(sys.argv[1]); f.with_suffix('.tmp').write_text(str(s.getsockname()[1])); "
               "f.with_suffix('.tmp').rename(f)\nwhile True: pass")


def spinning(flag: Path) -> None:
    """Wait until a spinner touched ``flag``: past its start-up (seconds, on a loaded machine)."""
    deadline = time.monotonic() + 60
    while not flag.exists():
        assert time.monotonic() < deadline, f"the spinner {flag.name} never started"
        time.sleep(0.05)


@contextlib.contextmanager
def child(flag: Path):
    """A spinner started from this process; yields its pid."""
    proc = subprocess.Popen([sys.executable, "-c", SPIN_CODE, str(flag)])
    try:
        spinning(flag)
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def strangers(folder: Path, n: int = 1, code: str = SPIN_CODE):
    """``n`` spinners started by a shell that exits at once: none is in this process's tree.
    Yields their pids."""
    one = f"{sys.executable} -c \"{code.replace(chr(10), '; ').replace('; while', chr(10) + 'while')}\""
    pids = []
    try:
        for i in range(n):
            shell = f"{one} {folder / f'stranger{i}'} >/dev/null 2>&1 & echo $!"
            pids.append(int(subprocess.run(["sh", "-c", shell], capture_output=True, text=True, check=True).stdout))
        for i in range(n):
            spinning(folder / f"stranger{i}")
        yield pids
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def engine_by_hand(folder: Path):
    """A stranger that listens on a port, as an engine started by hand. Yields (pid, port)."""
    with strangers(folder, 1, LISTEN_CODE) as [pid]:
        yield pid, int((folder / "stranger0").read_text())
