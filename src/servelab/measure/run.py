"""One bench run from its spec: the body of ``servelab bench``, and what a study, a
sweep, a scale replica or the demo calls for each run.

``execute`` reads as the steps of a run: spec → driver kind (measure/drivers.py:
where the load runs, and what that means for the rest) → target (measure/target.py) →
workload → sink (measure/sink.py) → driver → summary → console (measure/console.py) →
result and diagnosis (measure/result.py), how it ended (measure/ending.py). Around the
driver sit the run's hooks, chosen here once (loadgen/hooks.py): telemetry sampling
from t0, the display, the machine's share, and the records file dropped if the run fails.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from servelab.config import BenchSpec

from servelab.spec_checks import check_saturation_rule
from servelab.datasets import custom
from servelab.datasets.heap import TRIM_FROM, release_freed
from servelab.diagnose.verdict import render as render_diagnosis
from servelab.loadgen import live
from servelab.loadgen.glance import Glance
from servelab.loadgen.hooks import Display, Hooks
from servelab.loadgen.lora import request_models
from servelab.loadgen.progress import Progress, elapsed
from servelab.loadgen.values import BenchConfig, BenchRun
from servelab.measure import console, ending, simulated
from servelab.measure import sink as run_sink
from servelab.measure.beyond_vllm import beyond_vllm
from servelab.measure.drivers import DRIVERS, Bench, DriverKind, DriverRun
from servelab.measure.result import Finished, build, check_plots, rps_change_events
from servelab.measure.servelab_section import footer, servelab_section
from servelab.measure.target import ServerModels, bench_config, bench_tokenizer, model_names
from servelab.metrics.probe import probe_stats
from servelab.metrics.summary import Summary, summarize_tally
from servelab.metrics.tally import Tally
from servelab.datasets import structured
from servelab.quality import judge, responses, tasks, workload
from servelab.quality.structured import grade as grade_structured
from servelab.results import store
from servelab.results.records_file import FLUSH_S
from servelab.telemetry import machine
from servelab.telemetry.recorder import Recorder, metrics_url

__all__ = ["BenchOutcome", "bench_config", "bench_tokenizer", "execute"]


@dataclass(frozen=True, slots=True)
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
    """One run (``_run``); with --quality-*, its references checked first and its tasks sent
    as its requests (quality/workload.py)."""
    if spec.quality is not None:
        judge.check_references(spec.quality.references)
    with workload.with_tasks(spec) as sent:
        return _run(sent, context=context, on_start=on_start)


def _run(spec: BenchSpec, *, context: dict | None = None, on_start=None) -> BenchOutcome:
    """Run one bench from its spec (checked where it was built: spec_checks.check_spec); print
    vLLM's block; write files if asked. Mutates nothing.

    ``context`` (e.g. the engine and its memory report) goes into the result's
    ``servelab`` section; ``on_start(counters)`` is called at t0 (telemetry hooks in there);
    with one worker it may block and return an absolute t0 (``scale``'s replicas share one).
    """
    check_plots(spec.output)
    check_saturation_rule(spec)  # on the load the run is given (a sweep's base spec lacks the varied one)
    kind = DRIVERS[spec.driver]
    models = ServerModels(spec, kind.served)
    model, sent = model_names(spec, models)  # asks the server only when it names the model
    config = bench_config(spec, model, sent)
    with _recorder(spec, kind, config) as recorder:  # started early: its start-up overlaps the dataset's
        tokenizer, work = _prepare(spec, kind, model)
        config = _with_conversations(_per_request(config, spec, kind, work), spec, kind, tokenizer)
        card = models.get() if kind.served else simulated.card(config.model)
        console.notes(spec, config)
        console.preamble(config)
        sink = run_sink.sink(spec, kind, work, model, recorder.recovery() if recorder is not None else None)
        with run_sink.discard_on_error(sink):
            with _machine_share(kind, config) as shared, _hooks(spec, kind, work, sink, recorder, on_start) as hooks:
                drove = kind.run(Bench(spec, config, work, tokenizer, hooks), sink)
                if drove.drawn is not None:  # recycled lanes: the sessions never taken were not the run's
                    sink.tally.keep(drove.drawn)
            timeline = drove.timeline if drove.timeline is not None else _stop(recorder, drove.run)
    drove = drove.finished(timeline, context or {})
    run_sink.check_written(sink)
    summary = _summary(spec, sink.tally, drove.run)
    finished = Finished(spec, model, drove.run, sink.tally, summary, timeline, card, not kind.served)
    outcome = _report(finished, config, tokenizer, drove, context or {}, shared, sink.file)
    run_sink.finish_unsaved(spec, sink)
    return outcome


def _quality(m: Finished, extra: dict) -> dict:
    """--quality-*: the run's answers judged (quality/judge.py), its lines printed; after the run."""
    q = m.spec.quality
    if q is None or not q.judged:
        return {}
    refs = [(path, judge.read_result(path)) for path in q.references]
    items = tasks.load(q.tasks, q.tasks_seed) if q.tasks is not None else None
    kept = {**store.per_request_lists(m.tally, ("generated_texts", "errors")), "servelab": extra}
    judged = judge.judge(kept, "this run", refs, items, q.ratio)
    for said in judged.lines:
        print("servelab: quality · " + said)
    return judged.section


def _structured(m: Finished, config: BenchConfig) -> dict:
    """--structured-share: each constrained answer graded against its constraint (quality/structured.py)."""
    if not config.request_fields:
        return {}
    kept = store.per_request_lists(m.tally, ("generated_texts", "errors", "output_lens"))
    asked = [m.tally.requests[int(i)] for i in m.tally.indices()]
    graded = grade_structured([s.request_id for s in asked], [s.expected_output_len for s in asked],
                              kept["generated_texts"], kept["errors"], kept["output_lens"], config.request_fields,
                              m.spec.request.structured_field)
    for said in graded.lines:
        print("servelab: structured output · " + said)
    return graded.section


def _report(m: Finished, config: BenchConfig, tokenizer, drove: DriverRun, context: dict, shared: dict,
            records_file) -> BenchOutcome:
    """After the run: vLLM's block and servelab's lines, the result (its files) and its diagnosis."""
    spec, run = m.spec, m.run
    labels = {**drove.labels, **simulated.detected(m.card, context.get("engine"))}
    shown = console.shown_metrics(list(spec.output.percentile_metrics), config)
    probes = probe_stats(run.probes) if config.load.probe_request_rate > 0 else None
    console.block(m.summary, m.tally, config, shown, probes, labels)
    console.multi_turn_units(spec, m.summary, drove.replay)
    extra = sections(servelab_section(m, config, tokenizer), labels, context, drove.sections, shared,
                     ending.section(m.tally, run, drove.replay))
    footer(extra)
    if said := ending.line(extra["ending"]):
        print(said)
    extra.update(beyond_vllm(spec, m.tally, m.summary, drove.replay, m.timeline))
    if spec.output.save_detailed:  # the answers kept for quality/ (per turn in a multi-turn run)
        extra.update(responses.section(m.tally.requests, m.tally.indices(), tokenizer, m.simulated,
                                       responses.sampling_of(dict(spec.request.sampling), dict(spec.request.extra_body))))
        extra.update(_quality(m, extra))
        extra.update(_structured(m, config))
    console.warnings(drove.warnings)
    keys = {**(probes or {}), **rps_change_events(spec.load, m.tally, run)}
    result, path, diagnosis = build(m, shown, extra, keys, records_file)
    print(render_diagnosis(diagnosis))
    return BenchOutcome(m.summary, run, m.tally, result, path, ending.exit_code(run, m.summary.completed))


def sections(*parts: dict) -> dict:
    """The result's ``servelab`` section from its parts; a key two parts both give is a bug
    (one would silently win), not a merge."""
    merged: dict = {}
    for part in parts:
        if twice := merged.keys() & part.keys():
            raise AssertionError(f"two parts of the result's servelab section give {sorted(twice)}")
        merged.update(part)
    return merged


def _prepare(spec: BenchSpec, kind: DriverKind, model: str):
    """The tokenizer and the run's requests (``Sample``), or a multi-turn run's conversations."""
    with elapsed(f"preparing {spec.dataset.num_prompts} requests ({spec.dataset.name})") \
            if spec.output.progress else contextlib.nullcontext():
        tokenizer = bench_tokenizer(spec, model, kind.served)
        return tokenizer, kind.prepare(spec, tokenizer)


def _per_request(config: BenchConfig, spec: BenchSpec, kind: DriverKind, work) -> BenchConfig:
    """The model name each request carries (--lora-modules) and its constraint (--structured-share),
    once the requests are known."""
    r, samples = spec.request, kind.requests(work)
    return dataclasses.replace(
        config, request_models=request_models(samples, r.lora_modules, r.lora_assignment, spec.seed),
        request_fields=structured.assign(samples, r.structured_share, r.structured_kind, spec.seed,
                                         dict(r.extra_body).get(structured.KEY), r.structured_field))


def _with_conversations(config: BenchConfig, spec: BenchSpec, kind: DriverKind, tokenizer) -> BenchConfig:
    """A custom dataset's ``messages`` lines, sent whole to a chat endpoint (datasets/custom.py)."""
    d = spec.dataset
    if d.name != "custom" or d.path is None or tokenizer is None or kind.work != "requests" or (
            config.kind != "chat" and not d.skip_chat_template):  # --multi-turn: its lines are conversations
        return config
    return dataclasses.replace(config, chat_messages=custom.conversations(d, tokenizer, config.kind))


def _summary(spec: BenchSpec, tally: Tally, run: BenchRun) -> Summary:
    out = spec.output
    if tally.added >= TRIM_FROM:  # the streams' buffers are freed: hand them back before the summary's copies
        release_freed()
    return summarize_tally(tally, run.outcome.end_ns - run.outcome.t0_ns, list(out.metric_percentiles),
                           dict(out.goodput) or None)


@contextlib.contextmanager
def _machine_share(kind: DriverKind, config: BenchConfig):
    """How busy this machine was while the load ran, apart from the server's own processes:
    the result's ``machine`` section, filled in once the driver returns (a simulated run
    has none: nothing ran beside it)."""
    shared: dict = {}
    if not kind.served:
        yield shared
        return
    engine_pids, unseen = machine.local_engine(config.base_url)  # started by hand: not a neighbour
    before = machine.snapshot(engine_pids)
    yield shared
    shared["machine"] = {**machine.share(before, machine.snapshot(engine_pids)),
                         "local_engine_pids": list(engine_pids),
                         "unattributed": [x for x in (unseen, kind.unattributed) if x]}


@contextlib.contextmanager
def _recorder(spec: BenchSpec, kind: DriverKind, config: BenchConfig):
    """A telemetry recorder for this run (None with --no-telemetry, or with no server); always cleaned up."""
    if not spec.output.telemetry or not kind.served:
        yield None
        return
    with Recorder(metrics_url(config.base_url), spec.output.telemetry_interval_s, insecure=not config.verify_tls,
                  folder=run_sink.records_dir(spec)) as recorder:  # beside the records: a kill leaves both
        recorder.start()
        yield recorder


@contextlib.contextmanager
def _hooks(spec: BenchSpec, kind: DriverKind, work, sink, recorder, on_start):
    """The run's hooks, chosen once: at t0 the caller's (it may wait for a shared start), then
    the telemetry's, then the display; the records file's tick; the live panel's glance. The
    display is stopped here, however the run ends."""
    if recorder is not None:
        recorder.wait_ready()  # the scraper must be sampling and the client sampler ticking at t0

    def started(counters) -> int | None:
        t0 = on_start(counters) if on_start is not None else None
        sink.watch(counters.begun)
        if recorder is not None:
            recorder.on_start(counters)
        return t0

    total = len(kind.requests(work))
    glance = Glance(total) if kind.glanced and _live(spec, kind) else None
    display = _display(spec, kind, total, sink.tally, recorder, glance, getattr(work, "until_s", None))
    try:
        yield Hooks(started, sink.tick, glance, display, FLUSH_S)
    finally:
        if display is not None:
            display.stop()


def _live(spec: BenchSpec, kind: DriverKind) -> bool:
    """Whether the run shows the live panel (loadgen/live.py) rather than a progress line."""
    return spec.output.progress and kind.served and live.wanted()


def _display(spec: BenchSpec, kind: DriverKind, total: int, tally: Tally, recorder, glance,
             until_s: float | None = None) -> Display | None:
    """What the run shows while it goes: the live panel when it is wanted (in this process it
    is shown a glance at each response, loadgen/glance.py: no parse during the run; client
    workers', Ray shards' and multi-turn runs show it the records they make as they go), else
    the plain progress line; nothing with --disable-tqdm or without a server (no waiting)."""
    if not spec.output.progress or not kind.served:
        return None
    if _live(spec, kind):
        return live.Panel(total, spec.output.label or "bench", tally,
                          recorder.latest if recorder is not None else None, glance=glance, until_s=until_s)
    return Progress(total, until_s=until_s)


def _stop(recorder, run: BenchRun):
    """The served run's telemetry timeline over its span (None without telemetry)."""
    return recorder.stop(run.outcome.t0_ns, run.outcome.end_ns) if recorder else None
