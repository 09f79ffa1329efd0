"""The calls a run makes to its server outside the measured requests: the model card
(``/v1/models``), the ready check, the warm-ups, the connections opened before t0, and
vLLM's profiler start and stop."""

from __future__ import annotations

import asyncio
import json
import time

from servelab.client import openai
from servelab.client.http import Pool
from servelab.errors import ServerError
from servelab.loadgen.values import BenchConfig


def nothing_answered(base_url: str) -> str:
    """The one line for a server that is not there (yet)."""
    return (f"nothing answered at {base_url} (is the server running there? pass --ready-check-timeout-sec N "
            "to wait up to N s for one that is starting)")


async def fetch_models(pool: Pool, headers: dict | None = None) -> dict | None:
    """The server's ``/v1/models`` answer, for provenance and a default model; None when
    it answered something else; ServerError (the socket's error) when nothing answered."""
    resp = await pool.request("GET", "/v1/models", headers=headers)
    if resp.error and resp.status == 0:
        raise ServerError(resp.error)
    if resp.error or resp.status != 200:
        return None
    try:
        return json.loads(resp.body())
    except ValueError:
        return None


async def wait_ready(config: BenchConfig, pool: Pool, probe: bytes) -> None:
    """vLLM's ``--ready-check-timeout-sec``: retry one real request until it succeeds."""
    deadline = time.monotonic() + config.load.ready_check_timeout_s
    last = "no attempt"
    while time.monotonic() < deadline:
        resp = await pool.send(probe)
        if not resp.error and resp.status == 200:
            return
        last = resp.error or openai.http_error(resp.status, resp.reason, resp.body())
        await asyncio.sleep(1.0)
    raise ServerError(f"{config.base_url} not ready after {config.load.ready_check_timeout_s:.0f} s: {last}")


async def warm_up(config: BenchConfig, pool: Pool, probe: bytes) -> None:
    sem = asyncio.Semaphore(config.load.max_concurrency or config.load.num_warmups)

    async def one():
        async with sem:
            await pool.send(probe)

    await asyncio.gather(*(one() for _ in range(config.load.num_warmups)))


async def warm(config: BenchConfig, pool: Pool, n: int) -> None:
    """Open the run's connections before t0 (``Pool.warm``); a refused one is one line."""
    try:
        await pool.warm(min(config.load.max_concurrency or n, n, 1024))
    except OSError:
        raise ServerError(nothing_answered(config.base_url)) from None


async def profile(config: BenchConfig, pool: Pool, action: str) -> None:
    """vLLM's server profiler (served when it runs with --profiler-config): start or stop.
    A refusal is said in one line and the run goes on, as in vLLM."""
    print(f"{'Starting' if action == 'start' else 'Stopping'} profiler...", flush=True)
    resp = await pool.request("POST", f"/{action}_profile", headers={**config.auth_headers(), **config.headers})
    if not resp.error and resp.status == 200:
        print(f"Profiler {action}ed" if action == "start" else "Profiler stopped", flush=True)
        return
    why = resp.error or openai.http_error(resp.status, resp.reason, resp.body())
    print(f"servelab: WARNING /{action}_profile failed ({why}); is the server started with --profiler-config?",
          flush=True)
