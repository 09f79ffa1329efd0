"""Did the GPU memory come back after an engine stopped?

A stopped engine whose memory is still held (a worker that outlived the group, a
driver slow to release, another tenant) makes the next engine of a study start
with less room — fewer KV blocks, different numbers — or not start at all. So a
session reads each GPU's used memory before it starts an engine and, after the
stop, waits until it is back within ``SLACK_GIB`` of that, saying so if it is not.
No GPU (or no NVML): nothing to check.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from servelab.telemetry.gpu import open_gpus

SLACK_GIB = 0.5
WAIT_S = 30.0


def used_gib() -> list[float | None] | None:
    """Used memory per GPU now, in GiB (None for a GPU that did not answer); None without NVML."""
    gpus, _ = open_gpus()
    if gpus is None:
        return None
    try:
        return [d.get("mem_used_gib") for d in gpus.sample()]
    finally:
        gpus.close()


def not_returned(before: list[float | None] | None, read: Callable[[], list] | None = None,
                 wait_s: float = WAIT_S, step_s: float = 1.0) -> list[str]:
    """Lines naming each GPU still holding more than ``before`` + slack after ``wait_s``;
    [] when all came back (or nothing can be known). NVML stays open while it waits."""
    if before is None:
        return []
    gpus = None
    if read is None:
        gpus, _ = open_gpus()
        if gpus is None:
            return []
        read = lambda: [d.get("mem_used_gib") for d in gpus.sample()]  # noqa: E731
    try:
        held = _wait(before, read, wait_s, step_s)
    finally:
        if gpus is not None:
            gpus.close()
    return [f"GPU {i} still holds {extra:.1f} GiB more than before the engine started ({wait_s:.0f} s after "
            "its stop): the next engine starts with less memory" for i, extra in held]


def _wait(before: list, read, wait_s: float, step_s: float) -> list[tuple[int, float]]:
    deadline = time.monotonic() + wait_s
    while True:
        now = read() or []
        held = [(i, now[i] - before[i]) for i in range(min(len(now), len(before)))
                if now[i] is not None and before[i] is not None and now[i] - before[i] > SLACK_GIB]
        if not held or time.monotonic() >= deadline:
            return held
        time.sleep(step_s)
