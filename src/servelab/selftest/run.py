"""Drive the selftest: the mock in a child process on one core, the client here
on another, then compare against the mock's truth (see ``servelab.selftest``)."""

from __future__ import annotations

import asyncio
import os

from servelab.config import LoadSpec
from servelab.loadgen import live
from servelab.loadgen.glance import Glance
from servelab.loadgen.drive import run_bench
from servelab.loadgen.hooks import Hooks
from servelab.loadgen.values import BenchConfig
from servelab.loadgen.loop import loop_run
from servelab.metrics.tally import Tally
from servelab.results.store import RecordSink
from servelab.mock.config import MockConfig
from servelab.mock.launch import run_in_subprocess
from servelab.selftest.fidelity import client_view, compare, pin_to_cpus, synthetic_requests


def _cpus() -> tuple[set[int], list[int] | None]:
    """Client on the first allowed CPU, mock on the second, when there are two."""
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except AttributeError:
        return set(), None
    if len(allowed) < 2:
        return set(allowed), None
    return {allowed[0]}, [allowed[1]]


def _bench(url: str, samples, concurrency: int):
    """(the run, its records) against the mock at ``url``. With ``SERVELAB_LIVE=1`` the live
    panel draws meanwhile, as in a bench (its cost on the figures is what that measures);
    otherwise never, even on a terminal: the selftest measures the client as CI runs it."""
    config = BenchConfig(base_url=url, endpoint="/v1/completions", kind="completions", model="mock",
                         load=LoadSpec(max_concurrency=concurrency), ignore_eos=True)
    sink = RecordSink(Tally(samples))
    glance = Glance(len(samples)) if live.forced_to() else None
    panel = live.Panel(len(samples), "selftest", sink.tally, glance=glance) if glance is not None else None
    try:
        run = loop_run(run_bench(config, samples, None, asyncio.Event(), sink=sink,
                                 hooks=Hooks(glance=glance, display=panel)))
    finally:
        if panel:
            panel.stop()
    return run, sink.tally.records()


def fidelity(mock_cpus, args) -> tuple[dict, float]:
    n = args.num_prompts or 4 * args.concurrency
    streams = min(args.concurrency, n)  # what runs: 50 requests never open 512 streams
    cfg = MockConfig(ttft_ms=args.ttft_ms, itl_ms=args.itl_ms, port=0, model="mock")
    with run_in_subprocess(cfg, cpu=mock_cpus) as mock:
        run, records = _bench(mock.url, synthetic_requests(n, args.output_len), streams)
        truth = mock.truth()
    result = compare(client_view(records), truth, streams)
    duration = (run.outcome.end_ns - run.outcome.t0_ns) / 1e9
    return result.to_dict(), run.client_cpu_s / duration


def ceiling(mock_cpus, streams: int, tokens: int) -> dict:
    cfg = MockConfig(ttft_ms=0, itl_ms=0, port=0, model="mock")
    with run_in_subprocess(cfg, cpu=mock_cpus) as mock:
        run, records = _bench(mock.url, synthetic_requests(streams, tokens), streams)
    duration = (run.outcome.end_ns - run.outcome.t0_ns) / 1e9
    out_tokens = sum(r.output_tokens for r in records if r.success)
    return {"streams": streams, "tokens": tokens, "output_tok_s": out_tokens / duration,
            "client_cpu": run.client_cpu_s / duration, "failed": sum(not r.success for r in records)}


def run_selftest(args) -> dict:
    client_cpus, mock_cpus = _cpus()
    before = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    if mock_cpus:
        pin_to_cpus(client_cpus)
    try:
        return _measure(client_cpus, mock_cpus, args)
    finally:  # run in-process (tests, `servelab demo`): give the caller its CPUs back
        if before is not None:
            pin_to_cpus(before)


def _measure(client_cpus, mock_cpus, args) -> dict:
    fid, cpu = fidelity(mock_cpus, args)
    figures = {"client_cpus": sorted(client_cpus), "mock_cpus": mock_cpus or "shared",
               "ttft_ms": args.ttft_ms, "itl_ms": args.itl_ms, "output_len": args.output_len,
               "fidelity": fid, "fidelity_client_cpu": cpu}
    if not args.skip_ceiling:
        figures["ceiling"] = ceiling(mock_cpus, args.ceiling_streams, args.ceiling_tokens)
    return figures
