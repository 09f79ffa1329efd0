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


def used_gib() -> list[float] | None:
    """Used memory per GPU now, in GiB; None without NVML or a GPU."""
    gpus, _ = open_gpus()
    if gpus is None:
        return None
    try:
        return [d.get("mem_used_gib") or 0.0 for d in gpus.sample()]
    finally:
        gpus.close()


def not_returned(before: list[float] | None, read: Callable[[], list[float] | None] = used_gib,
                 wait_s: float = WAIT_S, step_s: float = 1.0) -> list[str]:
    """Lines naming each GPU still holding more than ``before`` + slack after ``wait_s``; [] when all came back."""
    if before is None:
        return []
    deadline = time.monotonic() + wait_s
    while True:
        now = read()
        if now is None:
            return []
        held = [(i, now[i] - before[i]) for i in range(min(len(now), len(before))) if now[i] - before[i] > SLACK_GIB]
        if not held or time.monotonic() >= deadline:
            break
        time.sleep(step_s)
    return [f"GPU {i} still holds {extra:.1f} GiB more than before the engine started ({wait_s:.0f} s after "
            "its stop): the next engine starts with less memory" for i, extra in held]
