"""One bench run from parsed bench flags: dataset → load → records → metrics →
console block and result files. The body of ``servelab bench``, and what a
study, a sweep or the demo calls for each run."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import os
import signal
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path


from servelab.config import BenchSpec, ServerSpec, TokenizerSpec
from servelab.flags.bench_serve import check_spec
from servelab.client import openai
from servelab.client.http import Pool
from servelab.datasets import prepare_requests, sample_conversations
from servelab.datasets.tokenizer import bundled_qwen3_tokenizer_path, load_tokenizer
from servelab.diagnose.decide import diagnose
from servelab.diagnose.evidence import evidence, facts_from_result
from servelab.diagnose.verdict import render as render_diagnosis
from servelab.errors import ServerError, TokenizerError
from servelab.loadgen.conversations import run_conversations
from servelab.loadgen.drive import BenchConfig, BenchRun, fetch_models, run_bench
from servelab.loadgen.arrivals import ramp_rates, rate_steps
from servelab.loadgen.lora import request_models
from servelab.loadgen.loop import loop_run as _loop_run
from servelab.loadgen.shards import concurrency_shares
from servelab.loadgen.workers import run_workers
from servelab.loadgen.progress import Progress, elapsed
from servelab.loadgen.pacer import Counters
from servelab.metrics.console import console_block
from servelab.metrics.probe import probe_stats
from servelab.metrics.summary import Summary, summarize_tally
from servelab.metrics.tally import Tally
from servelab.results import store
from servelab.measure import simulated
from servelab.measure.beyond_vllm import beyond_vllm
from servelab.measure.servelab_section import footer, servelab_section
from servelab.telemetry import machine
from servelab.telemetry.recorder import Recorder, metrics_url
from servelab.telemetry.summary import summarize as summarize_timeline
from servelab.telemetry.timeline import timeline_path
from servelab.telemetry.timeline import write as write_timeline


@dataclass(slots=True)
class BenchOutcome:
    """Everything one run produced; ``result`` is the result JSON as a dict."""

    summary: Summary
    run: BenchRun
    result: dict
    result_path: Path | None
    exit_code: int


def execute(spec: BenchSpec, *, context: dict | None = None, on_start=None) -> BenchOutcome:
    """Run one bench from its spec; print vLLM's block; write files if asked. Mutates nothing.

    ``context`` (e.g. the engine and its memory report) goes into the result's
    ``servelab`` section; ``on_start`` is called at t0 (telemetry hooks in there); with
    one worker it may block and return an absolute t0 (``scale``'s replicas share one).
    """
    check_spec(spec)
    _check_plots(spec.output)
    model, sent = _model_names(spec)
    config = bench_config(spec, model, sent)
    with _recorder(spec, config) as recorder:  # started early: its start-up overlaps the dataset's
        with elapsed(f"preparing {spec.dataset.num_prompts} requests ({spec.dataset.name})") \
                if spec.output.progress else contextlib.nullcontext():
            tokenizer = bench_tokenizer(spec, model)
            samples = _workload(spec, tokenizer)
        if not spec.multi_turn.enabled:  # conversations name the served model (check_multi_turn)
            config = dataclasses.replace(config, request_models=request_models(
                samples, spec.request.lora_modules, spec.request.lora_assignment, spec.seed))
        _notes(spec, config)
        _preamble(config)
        replay, shared = None, None  # shared: how busy the machine was (none for a simulated run)
        sink = _sink(spec, samples)
        with _discard_on_error(sink):
            if spec.simulate is not None:  # no server: the simulated engine (measure/simulated.py)
                run, timeline, labels = simulated.run(spec, config, samples)
                workers = None
                for i, r in enumerate(run.records):
                    sink.add(i, r, run.outcome.t0_ns)
            else:
                engine_pids, unseen = machine.local_engine(config.base_url)  # started by hand: not a neighbour
                before = machine.snapshot(engine_pids)
                if spec.multi_turn.enabled:
                    run, replay = _run_conversations(spec, config, samples, tokenizer,
                                                     _with_telemetry(recorder, on_start))
                    sink = _sink_turns(spec, run, sink)
                    workers = None
                else:
                    run, workers = _drive(spec, config, samples, tokenizer, _with_telemetry(recorder, on_start),
                                          sink)
                ray = machine.RAY_ACTORS if spec.load.ray is not None else None
                shared = {**machine.share(before, machine.snapshot(engine_pids)),
                          "local_engine_pids": list(engine_pids), "unattributed": [x for x in (unseen, ray) if x]}
                timeline = recorder.stop(run.outcome.t0_ns, run.outcome.end_ns) if recorder else None
                labels = simulated.detected(run.server_models, (context or {}).get("engine"))
    run.tally = sink.tally
    out = spec.output
    summary = summarize_tally(run.tally, run.outcome.end_ns - run.outcome.t0_ns, list(out.metric_percentiles),
                              dict(out.goodput) or None)
    _print_failures(run)
    shown = _shown_metrics(list(out.percentile_metrics), config)
    if labels:
        print(simulated.banner(labels["simulated"]))
    probes = probe_stats(run.probes) if config.load.probe_request_rate > 0 else None
    print(console_block(summary, max_concurrency=config.load.max_concurrency,
                        request_rate=config.load.request_rate, selected=shown, probes=probes))
    extra = servelab_section(spec, config, run, summary, tokenizer)
    extra.update(labels)
    extra.update(context or {})
    if workers is not None:
        extra["workers"] = workers.section
    if shared is not None:
        extra["machine"] = shared
    footer(extra)
    extra.update(beyond_vllm(spec, run, summary, replay, timeline))
    for line in workers.failed if workers is not None else ():
        print(f"servelab: WARNING {line}; results cover the other workers' records")
    result, path, diagnosis = _result(spec, model, run, summary, shown, extra, timeline, sink.file,
                                      {**(probes or {}), **rps_change_events(spec.load, samples, run)})
    print(render_diagnosis(diagnosis))
    code = exit_code(run.outcome, summary.completed)
    return BenchOutcome(summary, run, result, path, code)


def _sink(spec: BenchSpec, samples) -> store.RecordSink:
    """Where the run's records go as they are made: its tally, and the records file when saved."""
    out = spec.output
    saved = out.save_result or out.append_result
    return store.RecordSink(Tally(samples, detailed=out.save_detailed),
                            store.RecordsFile(out.result_dir or ".") if saved else None)


@contextlib.contextmanager
def _discard_on_error(sink: store.RecordSink):
    try:
        yield
    except BaseException:
        if sink.file is not None:
            sink.file.discard()
        raise


@contextlib.contextmanager
def _recorder(spec: BenchSpec, config: BenchConfig):
    """A telemetry recorder for this run (None with --no-telemetry); always cleaned up."""
    if not spec.output.telemetry or spec.simulate is not None:
        yield None
        return
    with Recorder(metrics_url(config.base_url), spec.output.telemetry_interval_s,
                  insecure=not config.verify_tls) as recorder:
        recorder.start()
        yield recorder


def _with_telemetry(recorder, on_start):
    """The on_start hook: the scraper must be sampling and the client sampler ticking at t0."""
    if recorder is not None:
        recorder.wait_ready()

    def started(counters) -> int | None:
        t0 = on_start(counters) if on_start is not None else None  # may wait for a shared start
        if recorder is not None:
            recorder.on_start(counters)
        return t0

    return started


def bench_config(spec: BenchSpec, model: str, sent: str | None = None) -> BenchConfig:
    """What the load generator needs, for ``model`` (the spec's, or the server's);
    ``sent``: the name requests carry when it is not --served-model-name or ``model``."""
    server = spec.server
    kind = openai.BACKENDS[server.backend]
    return BenchConfig(
        base_url=server.base_url, endpoint=server.endpoint or openai.DEFAULT_ENDPOINTS[kind], kind=kind,
        model=sent or server.served_model_name or model, load=spec.load,
        # as in vLLM: a random dataset asks for exact output lengths
        ignore_eos=spec.request.ignore_eos or spec.dataset.name in ("random", "timed_trace"),  # as vLLM
        extra_body={**dict(spec.request.sampling), **dict(spec.request.extra_body)},
        headers=dict(server.headers), seed=spec.seed, verify_tls=server.verify_tls,
        logprobs=spec.request.logprobs, api_key=os.environ.get("OPENAI_API_KEY") or None,
        profile=server.profile)


def bench_tokenizer(spec: BenchSpec, model: str):
    """--tokenizer when given (it must load); else the model's own when it is found locally;
    else the bundled Qwen3 tokenizer, with a note saying why. None with --skip-tokenizer-init."""
    if spec.skip_tokenizer_init:
        return None
    if spec.tokenizer:
        return load_tokenizer(TokenizerSpec(spec.tokenizer, spec.trust_remote_code))
    try:
        return load_tokenizer(TokenizerSpec(model, spec.trust_remote_code))
    except TokenizerError as exc:
        bundled = bundled_qwen3_tokenizer_path()
        if bundled is None:
            raise
        print(f"servelab: note: no tokenizer for model {model!r} here ({exc}); using the bundled Qwen3 "
              f"tokenizer {bundled} (pass --tokenizer for exact prompt lengths)", file=sys.stderr)
        return load_tokenizer(TokenizerSpec(str(bundled)))


def _model_names(spec: BenchSpec) -> tuple[str, str | None]:
    """(the model: tokenizer, result's model_id; the name requests carry, None: the usual).

    Without --model, as vLLM: the server's first model card; requests carry its ``id``
    (the served name), the tokenizer and ``model_id`` come from its ``root`` (the model
    path it serves). A card without ``root`` (not vLLM) uses ``id`` for both."""
    if spec.server.model:
        return spec.server.model, None
    if spec.simulate is not None:
        return simulated.MODEL_NAME, None
    card = _first_model(spec.server)
    print(f"First model name: {card['id']}, first model id: {card.get('root') or card['id']}")
    return card.get("root") or card["id"], card["id"]


def _first_model(server: ServerSpec) -> dict:
    async def ask():
        pool = Pool(server.base_url, verify_tls=server.verify_tls)
        key = os.environ.get("OPENAI_API_KEY")
        try:
            return await fetch_models(pool, {**({"Authorization": f"Bearer {key}"} if key else {}),
                                             **dict(server.headers)})
        finally:
            pool.close()

    models = _loop_run(ask())
    try:
        card = models["data"][0]
        if isinstance(card.get("id"), str) and card["id"]:
            return card
    except (TypeError, KeyError, IndexError, AttributeError):
        pass
    raise ServerError(f"--model not given and {server.base_url}/v1/models did not name a model")


def _notes(spec: BenchSpec, config: BenchConfig) -> None:
    """Flags vLLM accepts and sends nothing for: said, not silently dropped."""
    if spec.request.use_beam_search:
        print("servelab: note: --use-beam-search has no effect (vllm bench serve 0.32 sends nothing for it "
              "either); pass --extra-body '{\"use_beam_search\": true}' to ask the server", file=sys.stderr)
    if spec.request.logprobs is not None and config.kind == "chat":
        print("servelab: note: --logprobs is not sent with --backend openai-chat (vllm bench serve 0.32 sends "
              "it with completions only)", file=sys.stderr)


def _preamble(config: BenchConfig) -> None:
    if config.load.ready_check_timeout_s <= 0:
        print("Skipping endpoint ready check.")
    print("Starting main benchmark run...")
    load = config.load
    if load.probe_request_rate > 0:
        print(f"Probe request rate: {load.probe_request_rate} req/s")
    if load.ramp_up_strategy is not None:
        print(f"Traffic ramp-up strategy: {load.ramp_up_strategy}.")
        print(f"Will increase RPS from {load.ramp_up_start_rps} to {load.ramp_up_end_rps} RPS over the "
              "duration of the benchmark.")
    else:
        print(f"Traffic request rate: {load.request_rate}")
    dist = "Poisson process" if load.burstiness == 1.0 else "Gamma distribution"
    print(f"Burstiness factor: {load.burstiness} ({dist})")
    print(f"Maximum request concurrency: {load.max_concurrency}", flush=True)


def exit_code(outcome, completed: int) -> int:
    """128 + the signal that stopped the run (Ctrl-C 130, SIGTERM 143); 1 when nothing completed."""
    if outcome.interrupted:
        return 128 + (outcome.stopped_by or signal.SIGINT)
    return 1 if completed == 0 else 0


def _drive(spec: BenchSpec, config: BenchConfig, samples, tokenizer, on_start, sink):
    """The run in this process, or split between ``--workers`` processes (loadgen/workers.py);
    every record goes to ``sink`` as it is made (or returned)."""
    if spec.load.ray is not None:
        from servelab.loadgen.ray_shards import run_ray  # Ray is optional: imported only here

        print(f"servelab: load from the Ray cluster at {spec.load.ray}, one shard per node", flush=True)
        workers = run_ray(config, samples, tokenizer, spec.load.ray, on_start, sink)
        return workers.run, workers
    if spec.load.workers == 1:
        return _run(config, samples, tokenizer, progress=spec.output.progress, on_start=on_start, sink=sink), None
    print(f"servelab: {spec.load.workers} client workers, one schedule dealt round-robin; "
          f"max concurrency split {concurrency_shares(config.load.max_concurrency, spec.load.workers)}",
          flush=True)
    workers = run_workers(config, samples, tokenizer, spec.load.workers, on_start, progress=spec.output.progress,
                          sink=sink)
    return workers.run, workers


def _workload(spec: BenchSpec, tokenizer) -> list:
    """The run's requests, or with --multi-turn its conversations."""
    if spec.multi_turn.enabled:
        return sample_conversations(spec.dataset, spec.multi_turn, tokenizer)
    return prepare_requests(spec.dataset, tokenizer)


def _sink_turns(spec: BenchSpec, run: BenchRun, sink: store.RecordSink) -> store.RecordSink:
    """A --multi-turn run's sink: its turns' tally (run_conversations holds its records
    in memory, bounded to this feature), indexed by turn, not by conversation."""
    if sink.file is not None:
        for r in run.records:
            sink.file.write(r, run.outcome.t0_ns)
    return store.RecordSink(run.tally, sink.file)


def _run_conversations(spec: BenchSpec, config: BenchConfig, conversations, tokenizer, on_start):
    """A --multi-turn run (loadgen/conversations.py) in this process: (BenchRun, Replay)."""
    def go(stop, counters, started):
        return run_conversations(config, conversations, spec.multi_turn, tokenizer, stop, counters, started)

    total = sum(len(c.turns) for c in conversations)
    return _run(config, conversations, tokenizer, spec.output.progress, on_start, go=go, total=total)


def _run(config: BenchConfig, samples, tokenizer, progress: bool, on_start=None, go=None, total=None,
         sink=None):
    """One run in this process, Ctrl-C and SIGTERM stopping it; ``go(stop, counters, started)``
    makes the run's coroutine (default: ``run_bench`` over ``samples``)."""
    async def main():
        loop = asyncio.get_running_loop()
        stop, stopped = asyncio.Event(), []

        def on_signal(sig: int) -> None:
            stopped.append(sig)
            stop.set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal, sig)
        counters = Counters()
        bar = Progress(total or len(samples), counters) if progress else None

        def started() -> int | None:
            t0 = on_start(counters) if on_start else None
            if bar:
                bar.start()
            return t0

        try:
            if go is None:
                out = run = await run_bench(config, samples, tokenizer, stop, counters, on_start=started, sink=sink)
            else:
                out = await go(stop, counters, started)
                run = out[0]
            run.outcome.stopped_by = stopped[0] if stopped else None
            return out
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
    shown, load = [], config.load
    for m in selected:
        if m == "client_queue_time" and load.max_concurrency is None:
            continue
        if m == "e2el_including_client_queue" and (load.max_concurrency is None
                                                   or math.isinf(load.request_rate)):
            continue
        shown.append(m)
    return shown


def _print_failures(run: BenchRun, limit: int = 5) -> None:
    failed = run.tally.failures()
    if not failed:
        return
    print(f"Failed requests during benchmark run detected (showing {min(limit, len(failed))} "
          f"of {len(failed)}):")
    for i, (request_id, error) in enumerate(failed[:limit]):
        print(f"Error {i} [{request_id}]: {error}")


def _result(spec: BenchSpec, model: str, run: BenchRun, summary, shown, extra, timeline=None, records_file=None,
            keys=None):
    """Build the result JSON, diagnose it; write it (records, timeline) when asked to save.
    ``keys``: vLLM's optional top-level keys (probe_*, rps_change_events)."""
    out, load = spec.output, spec.load
    date = datetime.fromtimestamp(run.wall_start).strftime("%Y%m%d-%H%M%S")
    save = out.save_result or out.append_result
    path = rec_path = tl_path = None
    if save or out.plot_timeline or out.plot_dataset_stats:  # vLLM names the file for plots too
        path = store.result_filename(out.label, spec.server.backend, load.request_rate, load.max_concurrency,
                                     model, date, out.result_filename, out.result_dir, _ramp(load))
    if save:
        rec_path = store.records_path(path, date, out.append_result)
        extra["records_file"] = str(rec_path)
        tl_path = timeline_path(path, date, out.append_result) if timeline else None
    head = {"date": date, "endpoint_type": spec.server.backend, "backend": spec.server.backend,
            "label": out.label, "model_id": model, "tokenizer_id": spec.tokenizer or model,
            "num_prompts": spec.dataset.num_prompts, **dict(out.metadata),
            "request_rate": load.request_rate if load.request_rate < float("inf") else "inf",
            "burstiness": load.burstiness, "max_concurrency": load.max_concurrency}
    if load.ramp_up_strategy is not None:
        head.update(ramp_up_strategy=load.ramp_up_strategy, ramp_up_start_rps=load.ramp_up_start_rps,
                    ramp_up_end_rps=load.ramp_up_end_rps)
    result = store.build_result(head=head, summary=summary, tally=run.tally, selected=shown,
                                save_detailed=out.save_detailed, extra=extra)
    result.update(keys or {})
    diagnosis = _diagnose(result, timeline, tl_path)
    if path is not None:
        write_plots(out, run, path)
    if save:
        store.write_result(result, path, out.append_result)
        records_file.close(rec_path)  # written as the requests completed
        if timeline is not None:
            write_timeline(timeline, tl_path)
        print(f"servelab: result {'appended to' if out.append_result else 'written to'} {path}; "
              f"per-request records in {rec_path}")
    return result, path, diagnosis


def rps_change_events(load, samples, run: BenchRun) -> dict:
    """vLLM's ``rps_change_events`` for a ramp: each whole rps and when (wall clock) the
    first request at that rate was dispatched."""
    if load.ramp_up_strategy is None:
        return {}
    rates = ramp_rates(len(samples), load.ramp_up_strategy, load.ramp_up_start_rps, load.ramp_up_end_rps)
    t0 = run.outcome.t0_ns

    def when(i: int) -> str:  # the tally is indexed as ``samples``
        at = run.wall_start + (run.tally.dispatched_ns(i, t0) - t0) / 1e9
        return datetime.fromtimestamp(at).isoformat()

    return {"rps_change_events": [{"rps": rps, "timestamp": when(i)}
                                  for rps, i in rate_steps(rates, load.ramp_up_start_rps)]}


def _ramp(load) -> tuple | None:
    """(strategy, start, end) for the file name, as vLLM names a ramp's result."""
    if load.ramp_up_strategy is None:
        return None
    return load.ramp_up_strategy, load.ramp_up_start_rps, load.ramp_up_end_rps


def _check_plots(out) -> None:
    from servelab.results.plots import require_matplotlib

    for flag, on in (("--plot-timeline", out.plot_timeline), ("--plot-dataset-stats", out.plot_dataset_stats)):
        if on:
            require_matplotlib(flag)


def write_plots(out, run: BenchRun, path: Path) -> None:
    """--plot-timeline and --plot-dataset-stats, beside the result file (vLLM's names)."""
    if out.plot_timeline:
        from servelab.results.plots import write_request_timeline

        target = path.with_suffix(".timeline.html")
        write_request_timeline(run.records, run.outcome.t0_ns, out.timeline_itl_thresholds_ms, target)
        print(f"servelab: request timeline written to {target}")
    if out.plot_dataset_stats:
        from servelab.results.plots import write_dataset_stats

        target = path.with_suffix(".dataset_stats.png")
        write_dataset_stats(run.records, target)
        print(f"servelab: dataset statistics written to {target}")


def _diagnose(result: dict, timeline, tl_path: Path | None):
    """Put the timeline's summary and the diagnosis into the result's ``servelab`` section."""
    if timeline is not None:
        result["servelab"]["telemetry"] = {"timeline_file": str(tl_path) if tl_path else None,
                                           **summarize_timeline(timeline)}
    diagnosis = diagnose(evidence(facts_from_result(result), timeline))
    result["servelab"]["diagnosis"] = diagnosis.to_dict()
    return diagnosis
