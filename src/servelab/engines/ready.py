"""Waiting for an engine to answer, with a live one-line progress display.

Plain ``urllib`` with proxies switched off: an ``http_proxy`` in the user's
environment must not route ``127.0.0.1`` through a corporate proxy.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from servelab.errors import EngineError

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
POLL_S = 0.25


class Probe(NamedTuple):
    """One URL that must answer 2xx; ``optional``: a 404 also passes (the server has no such route)."""

    url: str
    optional: bool = False


def http_get(url: str, timeout_s: float = 2.0) -> tuple[int, bytes]:
    """(status, body); status 0 when nothing answered."""
    try:
        with _OPENER.open(url, timeout=timeout_s) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""
    except (OSError, ValueError):
        return 0, b""


def probes_pass(probes: list[Probe]) -> bool:
    """All probes, in order; a health route comes first because some servers open
    ``/v1/models`` before the model is loaded."""
    for probe in probes:
        status, _ = http_get(probe.url)
        if not (200 <= status < 300 or (probe.optional and status == 404)):
            return False
    return True


def wait_ready(
    name: str, probes: list[Probe], timeout_s: float, exited: Callable[[], int | None],
    log_path: Path, progress: bool,
) -> float:
    """Poll until ready; return seconds waited. EngineError if the process exits or time runs out."""
    start = time.monotonic()
    display = Progress(name, log_path, progress)
    while True:
        elapsed = time.monotonic() - start
        code = exited()
        if code is not None:
            display.close()
            raise EngineError(f"engine {name!r} exited with code {code} while starting; "
                              f"last log lines:\n{tail_text(log_path)}")
        if probes_pass(probes):
            display.close(f"engine {name!r} ready in {elapsed:.1f} s")
            return elapsed
        if elapsed > timeout_s:
            display.close()
            raise EngineError(f"engine {name!r} not ready after {timeout_s:.0f} s; "
                              f"last log lines:\n{tail_text(log_path)}")
        display.update(elapsed)
        time.sleep(POLL_S)


def served_model(base_url: str, fallback: str) -> str:
    """The first model id ``/v1/models`` lists (what clients must send), else ``fallback``."""
    status, body = http_get(f"{base_url}/v1/models")
    try:
        return json.loads(body)["data"][0]["id"] if status == 200 else fallback
    except (ValueError, KeyError, IndexError, TypeError):
        return fallback


def last_lines(log_path: Path, n: int) -> list[str]:
    """The last ``n`` non-blank lines; progress bars' carriage returns split lines too."""
    try:
        with open(log_path, "rb") as log:
            log.seek(0, 2)
            size = log.tell()
            log.seek(max(0, size - max(16384, 512 * n)))
            text = log.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    lines = [line.rstrip() for line in re.split(r"[\r\n]+", text)]
    return [line for line in lines if line.strip()][-n:]


def tail_text(log_path: Path, n: int = 20) -> str:
    return "\n".join(f"  | {line}" for line in last_lines(log_path, n)) or "  | (empty log)"


# "(EngineCore_DP0 pid=66914) INFO 09-21 12:29:22 [gpu_model_runner.py:2530] " — noise on one line
_LOG_PREFIX = re.compile(r"^(?:\([^)]*\)\s+)?(?:[A-Z]+ \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[^\]]*\]\s+)?")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class Progress:
    """``starting vllm  12 s  <last log line>`` rewritten in place on a terminal;
    on anything else just the final line, so captured logs do not fill with frames."""

    def __init__(self, name: str, log_path: Path, enabled: bool) -> None:
        self.name, self.log_path = name, log_path
        self.enabled = enabled
        self.live = enabled and sys.stderr.isatty()

    def update(self, elapsed: float) -> None:
        if not self.live:
            return
        last = last_lines(self.log_path, 1)
        line = _LOG_PREFIX.sub("", _ANSI.sub("", last[0])) if last else ""
        width = shutil.get_terminal_size((100, 20)).columns - 1
        text = f"starting {self.name} {elapsed:5.0f} s  {line}"[:width]
        sys.stderr.write(f"\r{text}\x1b[K")
        sys.stderr.flush()

    def close(self, message: str | None = None) -> None:
        if self.live:
            sys.stderr.write("\r\x1b[K")
        if self.enabled and message:
            sys.stderr.write(message + "\n")
        sys.stderr.flush()
