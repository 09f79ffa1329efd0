"""The event loop a run's process drives its load in: uvloop when installed (its
faster I/O is client headroom), else asyncio's own. Used by the single-process bench
(measure/run.py), each client worker (loadgen/workers.py) and each Ray shard."""

from __future__ import annotations

import asyncio


def loop_run(coro):
    try:
        import uvloop

        return uvloop.run(coro)
    except ImportError:
        return asyncio.run(coro)
