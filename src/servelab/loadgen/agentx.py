"""The AgentX-style locked scenario at run time (``--agentic-locked``; the sessions are cut
and marked by datasets/agentx.py): the warm-up turns before the run, and the run's
validity verdict after it.

A locked run is **invalid** when (AIPerf's SemiAnalysis AgentX FAQ, §7, read and written here):

- more than 1 % of its calls overflowed the context: rejected for their length (over the
  engine's max model len; matched on the error body, as ``OVERFLOW_MARKS``); the share is
  overflowed / calls answered (errors included, as AIPerf counts it), 0 with none;
- anything was cancelled: a stop (Ctrl-C, SIGTERM, a stop rule or a full disk) ended it;
- it ran shorter than its minimum (``--agentic-min-duration``, AgentX's 900 s by default);
- a warm-up turn failed (the measured sessions started from a cold cache).
"""

from __future__ import annotations

import asyncio

from servelab.client.http import Pool, Response
from servelab.datasets.agentic import Sessions
from servelab.loadgen.payloads import serialize
from servelab.loadgen.values import BenchConfig, BenchRun
from servelab.records import SampleRequest

OVERFLOW_LIMIT = 0.01  # invalid strictly above it
# lower-case pieces of a length rejection's body: vLLM ("This model's maximum context length is",
# "longer than the maximum model length"), OpenAI ("context_length_exceeded"), Anthropic-style proxies
OVERFLOW_MARKS = ("maximum context length", "maximum model length", "context_length_exceeded",
                  "prompt is too long")


async def send_warmups(config: BenchConfig, pool: Pool, work: Sessions) -> list[Response]:
    """Each session's warm-up turn (its prompt with its marker), all at once under
    --max-concurrency, before the run's t0: nothing of them is measured."""
    if not work.warm:
        return []
    sem = asyncio.Semaphore(config.load.max_concurrency or len(work.warm))
    first = work.requests[0]  # "<prefix><session>-0": the warm-ups take the run's prefix
    prefix = first.request_id[: -len(f"{work.sessions[0].session_id}-0")]

    async def one(s) -> Response:
        rid, call = f"{prefix}{s.session_id}-warmup", s.calls[0]
        sample = SampleRequest(tuple(work.blocks.prompt(s, 0)), call.input_len, call.output_len, rid)
        async with sem:
            return await pool.send(serialize(config, sample, pool, rid))

    return list(await asyncio.gather(*(one(s) for s in work.warm)))


def overflowed(resp: Response | None) -> bool:
    """Rejected for its length: an error status whose body says so."""
    if resp is None or resp.status in (0, 200):
        return False
    body = resp.body().decode("utf-8", "replace").lower()
    return any(mark in body for mark in OVERFLOW_MARKS)


def verdict(responses: list[Response | None], warmups: list[Response], run: BenchRun,
            min_duration_s: float) -> dict:
    """The locked run's validity, and every figure it was judged on."""
    answered = [r for r in responses if r is not None]
    over = sum(overflowed(r) for r in answered)
    rate = over / len(answered) if answered else 0.0
    outcome = run.outcome
    duration = (outcome.end_ns - outcome.t0_ns) / 1e9
    cancelled = outcome.interrupted or run.stopped_by is not None or run.ticked is not None
    failed_warm = sum(1 for r in warmups if r.error or r.status != 200 or r.closed_early)
    reasons = [f"context overflow {rate:.1%} of {len(answered)} calls, over {OVERFLOW_LIMIT:.0%}"] * (
        rate > OVERFLOW_LIMIT)
    reasons += ["cancelled (stopped before its sessions ended)"] * cancelled
    reasons += [f"shorter than its minimum ({duration:.1f} s < {min_duration_s:g} s)"] * (duration < min_duration_s)
    reasons += [f"{failed_warm} of {len(warmups)} warm-up turns failed"] * (failed_warm > 0)
    return {"valid": not reasons, "reasons": reasons, "duration_s": round(duration, 3),
            "min_duration_s": min_duration_s, "context_overflow": {"calls": over, "of": len(answered),
                                                                  "rate": round(rate, 4), "limit": OVERFLOW_LIMIT},
            "cancelled": cancelled, "warm_up": {"sent": len(warmups), "failed": failed_warm}}


def verdict_line(v: dict) -> str:
    """The verdict in one console line."""
    if v["valid"]:
        return (f"servelab: agentic locked run VALID ({v['duration_s']:.1f} s >= {v['min_duration_s']:g} s, context "
                f"overflow {v['context_overflow']['rate']:.1%}, nothing cancelled)")
    return f"servelab: agentic locked run INVALID: {'; '.join(v['reasons'])}"
