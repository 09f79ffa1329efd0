"""Helpers for engine tests (imported by name): the fake engine and a /proc view of a process group.
Ports and waiting: ``net_helpers``.

The /proc scan is deliberately independent of servelab's own (psutil-based)
``group_members``: a test that used the code under test to check itself could not fail.
"""

from __future__ import annotations

import sys
from pathlib import Path

from servelab.engines import EngineSpec

HERE = Path(__file__).resolve().parent
FAKE_ENGINE = HERE / "fake_engine.py"


def group_pids(pgid: int) -> list[int]:
    """Non-zombie pids whose process group is ``pgid``, read straight from /proc/<pid>/stat."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()  # after "(comm)": state ppid pgrp ...
        if int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(stat.parent.name))
    return pids


def fake_spec(port: int, *flags: str, ready_timeout_s: float = 20.0, **kw) -> EngineSpec:
    """A command engine running fake_engine.py on ``port`` with ``flags``."""
    return EngineSpec(
        name="fake", kind="command", model="fake-model", port=port, ready_timeout_s=ready_timeout_s,
        command=[sys.executable, str(FAKE_ENGINE), "--port", str(port), *flags],
        ready_url=f"http://127.0.0.1:{port}/health", **kw,
    )
