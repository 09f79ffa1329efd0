"""One bench run from parsed bench flags: dataset → load → records → metrics →
console block and result files. The body of ``servelab bench``, and what a
study, a sweep or the demo calls for each run."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import platform
import signal
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path


from servelab import __version__
from servelab.flags.bench import check_load, key_values, parse_goodput, parse_percentiles
from servelab.flags.dataset import dataset_spec_from_args, tokenizer_spec_from_args
from servelab.client import openai
from servelab.client.http import Pool
from servelab.datasets import sample_requests
from servelab.datasets.tokenizer import load_tokenizer
from servelab.diagnose.decide import diagnose
from servelab.diagnose.evidence import evidence, facts_from_result
from servelab.diagnose.verdict import render as render_diagnosis
from servelab.errors import InputError, ServerError
from servelab.loadgen.bench import BenchConfig, BenchRun, fetch_models, run_bench
from servelab.loadgen.progress import Progress, elapsed
from servelab.loadgen.runner import Counters
from servelab.metrics.console import console_block
from servelab.metrics.summary import NS_PER_MS, Summary, stat, summarize
from servelab.results import store
from servelab.study import simulated
from servelab.telemetry.recorder import Recorder, metrics_url
from servelab.telemetry.summary import summarize as summarize_timeline
from servelab.telemetry.timeline import timeline_path
from servelab.telemetry.timeline import write as write_timeline

# Above these the client, not the server, may be what the numbers measure.
CLIENT_CPU_LIMIT = 0.90  # fraction of one core
SCHEDULE_LAG_P99_LIMIT_MS = 10.0


@dataclass(slots=True)
class BenchOutcome:
    """Everything one run produced; ``result`` is the result JSON as a dict."""

    summary: Summary
    run: BenchRun
    result: dict
    result_path: Path | None
    exit_code: int


def run_bench_command(args) -> int:
    return execute(args).exit_code


def execute(args, *, context: dict | None = None, on_start=None) -> BenchOutcome:
    """Run one bench from parsed bench flags; print vLLM's block; write files if asked.

    ``context`` (e.g. the engine and its memory report) goes into the result's
    ``servelab`` section; ``on_start`` is called at t0 (telemetry hooks in there).
    """
    config, selected, pcts, slo, metadata = _config(args)
    with _recorder(args, config) as recorder:  # started early: its start-up overlaps the dataset's
        with elapsed(f"preparing {args.num_prompts} requests ({args.dataset_name})") if not args.disable_tqdm \
                else contextlib.nullcontext():
            tokenizer = load_tokenizer(tokenizer_spec_from_args(args))
            samples = sample_requests(dataset_spec_from_args(args), tokenizer)
        _preamble(config)
        if _simulate(args):  # no server: the simulated engine (study/simulated.py)
            args.model = args.model or config.model
            run, timeline, labels = simulated.run(args, config, samples)
        else:
            run = _run(config, samples, tokenizer, progress=not args.disable_tqdm,
                       on_start=_with_telemetry(recorder, on_start))
            timeline = recorder.stop(run.outcome.t0_ns, run.outcome.end_ns) if recorder else None
            labels = simulated.detected(run.server_models, (context or {}).get("engine"))
    summary = summarize(run.records, run.outcome.end_ns - run.outcome.t0_ns, pcts, slo or None)
    _print_failures(run)
    shown = _shown_metrics(selected, config)
    if labels:
        print(simulated.banner(labels["simulated"]))
    print(console_block(summary, max_concurrency=config.max_concurrency,
                        request_rate=config.request_rate, selected=shown))
    extra = servelab_section(args, config, run, summary, tokenizer)
    extra.update(labels)
    extra.update(context or {})
    _footer(extra)
    result, path, diagnosis = _result(args, run, summary, shown, metadata, extra, timeline)
    print(render_diagnosis(diagnosis))
    code = 130 if run.outcome.interrupted else (1 if summary.completed == 0 else 0)
    return BenchOutcome(summary, run, result, path, code)


def _simulate(args) -> bool:
    return getattr(args, "simulate", False)


@contextlib.contextmanager
def _recorder(args, config: BenchConfig):
    """A telemetry recorder for this run (None with --no-telemetry); always cleaned up."""
    if getattr(args, "no_telemetry", False) or _simulate(args):
        yield None
        return
    with Recorder(metrics_url(config.base_url), getattr(args, "telemetry_interval", 0.25),
                  insecure=not config.verify_tls) as recorder:
        recorder.start()
        yield recorder


def _with_telemetry(recorder, on_start):
    """The on_start hook: the scraper must be sampling and the client sampler ticking at t0."""
    if recorder is not None:
        recorder.wait_ready()

    def started(counters) -> None:
        if recorder is not None:
            recorder.on_start(counters)
        if on_start is not None:
            on_start(counters)

    return started


def _config(args):
    check_load(args)
    selected, pcts = parse_percentiles(args.percentile_metrics, args.metric_percentiles)
    slo = parse_goodput(args.goodput)
    headers = key_values(args.header, "--header")
    metadata = key_values(args.metadata, "--metadata")
    kind = openai.BACKENDS[args.backend]
    base_url = (args.base_url or f"http://{args.host}:{args.port}").rstrip("/")
    if args.model is None and not _simulate(args):
        args.model = _first_model(base_url)
    sampling = {k: v for k, v in {"temperature": args.temperature, "top_p": args.top_p,
                                  "top_k": args.top_k, "min_p": args.min_p}.items() if v is not None}
    config = BenchConfig(
        base_url=base_url, endpoint=args.endpoint or openai.DEFAULT_ENDPOINTS[kind], kind=kind,
        model=args.served_model_name or args.model or simulated.MODEL_NAME, request_rate=args.request_rate,
        burstiness=args.burstiness, max_concurrency=args.max_concurrency,
        # as in vLLM: a random dataset asks for exact output lengths
        ignore_eos=args.ignore_eos or args.dataset_name == "random",
        extra_body={**sampling, **_extra_body(args.extra_body)}, headers=headers,
        num_warmups=args.num_warmups, ready_check_timeout_s=args.ready_check_timeout_sec,
        seed=args.seed, verify_tls=not args.insecure)
    return config, selected, pcts, slo, metadata


def _extra_body(text: str | None) -> dict:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise InputError(f"--extra-body: not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise InputError("--extra-body: must be a JSON object")
    return value


def _first_model(base_url: str) -> str:
    async def ask():
        pool = Pool(base_url)
        try:
            return await fetch_models(pool)
        finally:
            pool.close()

    models = _loop_run(ask())
    try:
        return models["data"][0]["id"]
    except (TypeError, KeyError, IndexError):
        raise ServerError(f"--model not given and {base_url}/v1/models did not name a model") from None


def _loop_run(coro):
    try:
        import uvloop

        return uvloop.run(coro)
    except ImportError:
        return asyncio.run(coro)


def _preamble(config: BenchConfig) -> None:
    if config.ready_check_timeout_s <= 0:
        print("Skipping endpoint ready check.")
    print("Starting main benchmark run...")
    print(f"Traffic request rate: {config.request_rate}")
    dist = "Poisson process" if config.burstiness == 1.0 else "Gamma distribution"
    print(f"Burstiness factor: {config.burstiness} ({dist})")
    print(f"Maximum request concurrency: {config.max_concurrency}", flush=True)


def _run(config: BenchConfig, samples, tokenizer, progress: bool, on_start=None) -> BenchRun:
    async def main() -> BenchRun:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        counters = Counters()
        bar = Progress(len(samples), counters) if progress else None

        def started() -> None:
            if bar:
                bar.start()
            if on_start:
                on_start(counters)

        try:
            return await run_bench(config, samples, tokenizer, stop, counters, on_start=started)
        finally:
            if bar:
                bar.stop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return _loop_run(main())
    finally:  # asyncio resets them to the defaults; an engine guard may own them
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _shown_metrics(selected: list[str], config: BenchConfig) -> list[str]:
    """vLLM shows queue metrics only when a concurrency cap exists (and the
    queue-inclusive E2EL only with a finite rate)."""
    shown = []
    for m in selected:
        if m == "client_queue_time" and config.max_concurrency is None:
            continue
        if m == "e2el_including_client_queue" and (config.max_concurrency is None
                                                   or math.isinf(config.request_rate)):
            continue
        shown.append(m)
    return shown


def _print_failures(run: BenchRun, limit: int = 5) -> None:
    failed = [r for r in run.records if not r.success]
    if not failed:
        return
    print(f"Failed requests during benchmark run detected (showing {min(limit, len(failed))} "
          f"of {len(failed)}):")
    for i, r in enumerate(failed[:limit]):
        print(f"Error {i} [{r.request_id}]: {r.error}")


def servelab_section(args, config: BenchConfig, run: BenchRun, summary: Summary, tokenizer) -> dict:
    """What we add to vLLM's keys: client fidelity, rules used, provenance."""
    duration_s = summary.duration_s if summary.duration_s == summary.duration_s else 0.0
    lag = stat([r.lag_ns / NS_PER_MS for r in run.records], (50, 99))
    cpu_frac = run.client_cpu_s / duration_s if duration_s > 0 else 0.0
    sources = sorted({r.output_tokens_source for r in run.records if r.success})
    return {
        "version": __version__,
        "wall_start": datetime.fromtimestamp(run.wall_start).isoformat(timespec="milliseconds"),
        "t0_perf_ns": run.outcome.t0_ns,  # records' *_ms are from here (perf_counter_ns clock)
        "interrupted": run.outcome.interrupted,
        "not_sent": run.outcome.not_sent,
        "schedule_lag_ms": {"mean": lag.mean, "p50": lag.percentiles[0][1], "p99": lag.percentiles[1][1],
                            "max": max((r.lag_ns / NS_PER_MS for r in run.records), default=0.0)},
        "client_cpu_s": run.client_cpu_s,
        "client_cpu_fraction": cpu_frac,
        "client_bound": client_bound(cpu_frac, lag.percentiles[1][1], config),
        "rules": {"token_event": openai.TOKEN_EVENT_RULES[config.kind], "itl": summary.itl_rule,
                  "output_tokens": sources, "peak_output": "1 s bins from first send, weighted by tokens",
                  "peak_concurrency": "sweep-line over [sent, done)"},
        "provenance": provenance(args, config, run, tokenizer),
    }


def client_bound(cpu_frac: float, lag_p99_ms: float, config: BenchConfig) -> list[str]:
    reasons = []
    if cpu_frac >= CLIENT_CPU_LIMIT:
        reasons.append(f"client CPU at {cpu_frac:.0%} of a core")
    if not math.isinf(config.request_rate) and lag_p99_ms > SCHEDULE_LAG_P99_LIMIT_MS:
        reasons.append(f"schedule lag p99 {lag_p99_ms:.1f} ms")
    return reasons


def provenance(args, config: BenchConfig, run: BenchRun, tokenizer) -> dict:
    path = getattr(args, "dataset_path", None)
    return {
        "servelab_version": __version__, "python": platform.python_version(), "host": platform.node(),
        "argv": sys.argv[1:], "flags": {k: _jsonable(v) for k, v in vars(args).items()},
        "tokenizer": getattr(tokenizer, "name", str(tokenizer)),
        "dataset_path": path, "dataset_sha256": file_sha256(path), "seed": config.seed,
        "server_models": run.server_models,
    }


def file_sha256(path) -> str | None:
    if not path or not Path(path).is_file():
        return None
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _jsonable(v):
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if isinstance(v, (str, int, float, bool, type(None), list, dict)):
        return v
    return str(v)


def _footer(extra: dict) -> None:
    lag = extra["schedule_lag_ms"]
    print(f"servelab: client CPU {extra['client_cpu_fraction']:.0%} of a core · schedule lag "
          f"p50 {lag['p50']:.2f} ms, p99 {lag['p99']:.2f} ms · ITL rule: {extra['rules']['itl']}")
    if extra["client_bound"]:
        print("servelab: WARNING the client may limit this run (" + "; ".join(extra["client_bound"])
              + "): the numbers can understate the server")
    if extra["interrupted"]:
        print(f"servelab: interrupted — results cover the requests completed so far "
              f"({extra['not_sent']} never sent)")


def _result(args, run: BenchRun, summary, shown, metadata, extra, timeline=None):
    """Build the result JSON, diagnose it; write it (records, timeline) when asked to save."""
    date = datetime.fromtimestamp(run.wall_start).strftime("%Y%m%d-%H%M%S")
    save = args.save_result or args.append_result
    path = rec_path = tl_path = None
    if save:
        path = store.result_filename(args.label, args.backend, args.request_rate, args.max_concurrency,
                                     args.model, date, args.result_filename, args.result_dir)
        rec_path = store.records_path(path, date, args.append_result)
        extra["records_file"] = str(rec_path)
        tl_path = timeline_path(path, date, args.append_result) if timeline else None
    head = {"date": date, "endpoint_type": args.backend, "backend": args.backend, "label": args.label,
            "model_id": args.model, "tokenizer_id": args.tokenizer or args.model,
            "num_prompts": args.num_prompts, **metadata,
            "request_rate": args.request_rate if args.request_rate < float("inf") else "inf",
            "burstiness": args.burstiness, "max_concurrency": args.max_concurrency}
    result = store.build_result(head=head, summary=summary, records=run.records, selected=shown,
                                save_detailed=args.save_detailed, extra=extra)
    diagnosis = _diagnose(result, timeline, tl_path)
    if save:
        store.write_result(result, path, args.append_result)
        store.write_records(run.records, run.outcome.t0_ns, rec_path)
        if timeline is not None:
            write_timeline(timeline, tl_path)
        print(f"servelab: result {'appended to' if args.append_result else 'written to'} {path}; "
              f"per-request records in {rec_path}")
    return result, path, diagnosis


def _diagnose(result: dict, timeline, tl_path: Path | None):
    """Put the timeline's summary and the diagnosis into the result's ``servelab`` section."""
    if timeline is not None:
        result["servelab"]["telemetry"] = {"timeline_file": str(tl_path) if tl_path else None,
                                           **summarize_timeline(timeline)}
    diagnosis = diagnose(evidence(facts_from_result(result), timeline))
    result["servelab"]["diagnosis"] = diagnosis.to_dict()
    return diagnosis
