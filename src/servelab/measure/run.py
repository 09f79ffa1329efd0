"""One bench run from its spec: the body of ``servelab bench``, and what a study, a
sweep, a scale replica or the demo calls for each run.

``execute`` reads as the steps of a run: spec → target (measure/target.py) →
workload → sink → driver (measure/drivers.py: where the load runs) → summary →
console (measure/console.py) → result and diagnosis (measure/result.py). Around the
driver sit the run's hooks kept here: telemetry sampling from t0, the machine's
share, and the records file dropped if the run fails.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from servelab.config import BenchSpec
from servelab.datasets import prepare_requests, sample_conversations
from servelab.datasets.heap import TRIM_FROM, release_freed
from servelab.diagnose.verdict import render as render_diagnosis
from servelab.loadgen import live
from servelab.loadgen.drive import BenchConfig, BenchRun
from servelab.loadgen.glance import Glance
from servelab.loadgen.lora import request_models
from servelab.loadgen.progress import elapsed
from servelab.measure import console, early_end, simulated
from servelab.measure.beyond_vllm import beyond_vllm
from servelab.measure.drivers import DRIVERS, Bench, DriverRun, indexed
from servelab.measure.result import Measured, build, check_plots, exit_code, rps_change_events
from servelab.measure.servelab_section import footer, servelab_section
from servelab.measure.target import ServerModels, bench_config, bench_tokenizer, model_names
from servelab.metrics.probe import probe_stats
from servelab.metrics.summary import Summary, summarize_tally
from servelab.metrics.tally import Tally
from servelab.records import RecordSink
from servelab.telemetry import machine
from servelab.telemetry.recorder import Recorder, metrics_url

__all__ = ["BenchOutcome", "bench_config", "bench_tokenizer", "execute"]


@dataclass(slots=True)
class BenchOutcome:
    """Everything one run produced; ``result`` is the result JSON as a dict, ``tally``
    every record of the run (the sink's, read by the one who made it: here)."""

    summary: Summary
    run: BenchRun
    tally: Tally
    result: dict
    result_path: Path | None
    exit_code: int


def execute(spec: BenchSpec, *, context: dict | None = None, on_start=None) -> BenchOutcome:
    """Run one bench from its spec (checked where it was built: config.check_spec); print
    vLLM's block; write files if asked. Mutates nothing.

    ``context`` (e.g. the engine and its memory report) goes into the result's
    ``servelab`` section; ``on_start`` is called at t0 (telemetry hooks in there); with
    one worker it may block and return an absolute t0 (``scale``'s replicas share one).
    """
    check_plots(spec.output)
    models = ServerModels(spec)
    model, sent = model_names(spec, models)  # asks the server only when it names the model
    config = bench_config(spec, model, sent)
    with _recorder(spec, config) as recorder:  # started early: its start-up overlaps the dataset's
        tokenizer, work = _prepare(spec, model)
        bench = Bench(spec, _with_lora(config, spec, work), work, tokenizer, models.get())
        console.notes(spec, bench.config)
        console.preamble(bench.config)
        sink = early_end.sink(spec, work, model)
        with early_end.discard_on_error(sink):
            with _machine_share(spec, bench.config) as shared, _live_view(bench, sink, recorder) as shown:
                hooked = dataclasses.replace(_hooked(shown, recorder, on_start), tick=sink.tick)
                drove = DRIVERS[spec.driver](hooked, sink)
            timeline = drove.timeline if drove.timeline is not None else _stop(recorder, drove.run)
    early_end.check_written(sink, drove.run)
    summary = _summary(spec, sink.tally, drove.run)
    measured = Measured(spec, model, drove.run, sink.tally, summary, timeline)
    outcome = _report(measured, bench, drove, context or {}, shared, sink.file)
    early_end.finish_unsaved(spec, sink)
    return outcome


def _report(m: Measured, bench: Bench, drove: DriverRun, context: dict, shared: dict, records_file):
    """After the run: vLLM's block and servelab's lines, the result (its files) and its diagnosis."""
    spec, config, run = m.spec, bench.config, m.run
    labels = {**drove.labels, **simulated.detected(run.server_models, context.get("engine"))}
    shown = console.shown_metrics(list(spec.output.percentile_metrics), config)
    probes = probe_stats(run.probes) if config.load.probe_request_rate > 0 else None
    console.block(m.summary, m.tally, config, shown, probes, labels)
    console.multi_turn_units(spec, m.summary)
    extra = {**servelab_section(spec, config, run, m.tally, m.summary, bench.tokenizer, m.timeline), **labels, **context,
             **drove.sections, **shared, **early_end.section(m.tally, run, drove.replay)}
    footer(extra)
    if said := early_end.line(extra["ending"]):
        print(said)
    extra.update(beyond_vllm(spec, m.tally, m.summary, drove.replay, m.timeline))
    console.warnings(drove.warnings)
    keys = {**(probes or {}), **rps_change_events(spec.load, m.tally, run)}
    result, path, diagnosis = build(m, shown, extra, keys, records_file)
    print(render_diagnosis(diagnosis))
    return BenchOutcome(m.summary, run, m.tally, result, path, exit_code(run.outcome, m.summary.completed))


def _prepare(spec: BenchSpec, model: str):
    """The tokenizer and the run's requests (``Sample``), or with --multi-turn its conversations."""
    with elapsed(f"preparing {spec.dataset.num_prompts} requests ({spec.dataset.name})") \
            if spec.output.progress else contextlib.nullcontext():
        tokenizer = bench_tokenizer(spec, model)
        if spec.multi_turn.enabled:
            return tokenizer, sample_conversations(spec.dataset, spec.multi_turn, tokenizer)
        return tokenizer, prepare_requests(spec.dataset, tokenizer)


def _with_lora(config: BenchConfig, spec: BenchSpec, work) -> BenchConfig:
    """The model name each request carries (--lora-modules), once the requests are known."""
    return dataclasses.replace(config, request_models=request_models(
        indexed(work), spec.request.lora_modules, spec.request.lora_assignment, spec.seed))


def _summary(spec: BenchSpec, tally: Tally, run: BenchRun) -> Summary:
    out = spec.output
    if tally.added >= TRIM_FROM:  # the streams' buffers are freed: hand them back before the summary's copies
        release_freed()
    return summarize_tally(tally, run.outcome.end_ns - run.outcome.t0_ns, list(out.metric_percentiles),
                           dict(out.goodput) or None)


@contextlib.contextmanager
def _machine_share(spec: BenchSpec, config: BenchConfig):
    """How busy this machine was while the load ran, apart from the server's own processes:
    the result's ``machine`` section, filled in once the driver returns (a simulated run
    has none: nothing ran beside it)."""
    shared: dict = {}
    if spec.simulate is not None:
        yield shared
        return
    engine_pids, unseen = machine.local_engine(config.base_url)  # started by hand: not a neighbour
    before = machine.snapshot(engine_pids)
    yield shared
    ray = machine.RAY_ACTORS if spec.load.ray is not None else None
    shared["machine"] = {**machine.share(before, machine.snapshot(engine_pids)),
                         "local_engine_pids": list(engine_pids), "unattributed": [x for x in (unseen, ray) if x]}


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


@contextlib.contextmanager
def _live_view(bench: Bench, sink: RecordSink, recorder):
    """The bench as its driver runs it: with the live panel (loadgen/live.py) when it is wanted,
    which replaces the plain progress line. In this process the run shows it a glance at each
    response (loadgen/glance.py: no parse during the run); client workers' and Ray shards' runs,
    and multi-turn ones, show it the records they make as they go. As is, else."""
    spec = bench.spec
    if not spec.output.progress or spec.simulate is not None or not live.wanted():
        yield bench, None
        return
    total = len(indexed(bench.work))
    glance = Glance(total) if spec.driver == "local" else None
    panel = live.Panel(total, spec.output.label or "bench", sink.tally,
                       recorder.latest if recorder is not None else None, glance=glance)
    quiet = dataclasses.replace(spec, output=dataclasses.replace(spec.output, progress=False))
    try:
        yield dataclasses.replace(bench, spec=quiet, glance=glance), panel
    finally:
        panel.stop()


def _hooked(shown: tuple[Bench, live.Panel | None], recorder, on_start) -> Bench:
    """The bench with its t0 hook: the caller's and the telemetry's, then the panel's."""
    bench, panel = shown
    started = _with_telemetry(recorder, on_start)

    def hook(counters) -> int | None:
        t0 = started(counters)
        if panel is not None:
            panel.start(counters)
        return t0

    return dataclasses.replace(bench, on_start=hook)


def _stop(recorder, run: BenchRun):
    """The served run's telemetry timeline over its span (None without telemetry)."""
    return recorder.stop(run.outcome.t0_ns, run.outcome.end_ns) if recorder else None
