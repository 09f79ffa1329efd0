"""A finished bench as files: the result JSON (vLLM's keys, then servelab's section with
its telemetry summary and diagnosis), the records file, the telemetry timeline, the
plots, and the exit code. The result is diagnosed from its own dict, the path
``servelab diagnose`` takes with a saved file, so both say the same."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from servelab import __version__
from servelab.config import BenchSpec, LoadSpec, OutputSpec
from servelab.diagnose.decide import diagnose
from servelab.diagnose.evidence import evidence, facts_from_result
from servelab.loadgen.arrivals import ramp_rates, rate_steps
from servelab.loadgen.values import BenchRun
from servelab.metrics.summary import Summary
from servelab.metrics.tally import Tally
from servelab.results import store
from servelab.results.foreign import llmd
from servelab.telemetry.summary import summarize as summarize_timeline
from servelab.telemetry.timeline import Timeline, timeline_path
from servelab.telemetry.timeline import write as write_timeline


@dataclass(frozen=True, slots=True)
class Finished:
    """A finished run, as its result is built: ``model`` names it (model_id, the file name);
    ``card``: the server's /v1/models answer, asked once before the run (measure/target.py);
    ``simulated``: no server ran it (the simulator's fast mode)."""

    spec: BenchSpec
    model: str
    run: BenchRun
    tally: Tally
    summary: Summary
    timeline: Timeline | None
    card: dict | None = None
    simulated: bool = False


@dataclass(frozen=True, slots=True)
class Paths:
    """Where a run's files go (None: not written); vLLM names the result for plots too."""

    date: str
    result: Path | None = None
    records: Path | None = None
    timeline: Path | None = None


def build(m: Finished, shown: list[str], extra: dict, keys: dict, records_file=None):
    """The result JSON, diagnosed; written (records, timeline, plots) when asked to.
    ``keys``: vLLM's optional top-level keys (probe_*, rps_change_events).
    Returns (result, its path or None, the diagnosis)."""
    out = m.spec.output
    paths = _paths(m)
    if paths.records is not None:
        extra["records_file"] = str(paths.records)
    result = store.build_result(head=_head(m.spec, m.model, paths.date), summary=m.summary, tally=m.tally,
                                selected=shown, save_detailed=out.save_detailed, extra=extra)
    result.update(keys)
    diagnosis = _diagnose(result, m.timeline, paths.timeline)
    if paths.result is not None:
        write_plots(out, m.tally, m.run, paths.result)
    if paths.records is not None:
        _write(m, result, paths, records_file)
    return result, paths.result, diagnosis


def _paths(m: Finished) -> Paths:
    out, load = m.spec.output, m.spec.load
    date = datetime.fromtimestamp(m.run.wall_start).strftime("%Y%m%d-%H%M%S")
    save = out.save_result or out.append_result
    if not (save or out.plot_timeline or out.plot_dataset_stats):
        return Paths(date)
    path = store.result_filename(out.label, m.spec.server.backend, load.request_rate, load.max_concurrency,
                                 m.model, date, out.result_filename, out.result_dir, _ramp(load))
    if not save:
        return Paths(date, path)
    return Paths(date, path, store.records_path(path, date, out.append_result),
                 timeline_path(path, date, out.append_result) if m.timeline else None)


def _head(spec: BenchSpec, model: str, date: str) -> dict:
    """vLLM's leading keys, in its order."""
    out, load = spec.output, spec.load
    head = {"date": date, "endpoint_type": spec.server.backend, "backend": spec.server.backend,
            "label": out.label, "model_id": model, "tokenizer_id": spec.tokenizer or model,
            "num_prompts": spec.dataset.num_prompts, **dict(out.metadata),
            "request_rate": load.request_rate if load.request_rate < float("inf") else "inf",
            "burstiness": load.burstiness, "max_concurrency": load.max_concurrency}
    if load.ramp_up_strategy is not None:
        head.update(ramp_up_strategy=load.ramp_up_strategy, ramp_up_start_rps=load.ramp_up_start_rps,
                    ramp_up_end_rps=load.ramp_up_end_rps)
    return head


def planned(spec: BenchSpec, model: str) -> dict:
    """What a records file's sidecar keeps of its run, so ``results recover`` can build the
    result the run would have written: vLLM's leading keys (the date is known only at t0),
    how the result file is named, and what the summary reports."""
    out, load = spec.output, spec.load
    return {"servelab_version": __version__, "argv": list(spec.argv), "head": _head(spec, model, ""),
            "result_file": {"label": out.label, "backend": spec.server.backend, "request_rate": _rate(load),
                            "max_concurrency": load.max_concurrency, "model_id": model,
                            "result_filename": out.result_filename, "ramp": _ramp(load)},
            "saved": bool(out.save_result or out.append_result), "append": out.append_result,
            "percentile_metrics": list(out.percentile_metrics), "metric_percentiles": list(out.metric_percentiles),
            "goodput": dict(out.goodput)}


def _rate(load: LoadSpec) -> float | str:
    """JSON has no infinity: "inf", as vLLM's result writes it."""
    return load.request_rate if load.request_rate < float("inf") else "inf"


def _write(m: Finished, result: dict, paths: Paths, records_file) -> None:
    append = m.spec.output.append_result
    store.write_result(result, paths.result, append)
    records_file.close(paths.records)  # written as the requests completed
    if m.spec.output.llmd_report:
        report = llmd.write(result, llmd.report_path(paths.result, paths.date, append), m.spec.output.llmd_experiment)
        print(f"servelab: llm-d Benchmark Report v{llmd.VERSION} written to {report}")
    if m.timeline is not None:
        write_timeline(m.timeline, paths.timeline)
    print(f"servelab: result {'appended to' if append else 'written to'} {paths.result}; "
          f"per-request records in {paths.records}")


def rps_change_events(load: LoadSpec, tally: Tally, run: BenchRun) -> dict:
    """vLLM's ``rps_change_events`` for a ramp: each whole rps and when (wall clock) the
    first request at that rate was dispatched."""
    if load.ramp_up_strategy is None:
        return {}
    rates = ramp_rates(len(tally.requests), load.ramp_up_strategy, load.ramp_up_start_rps, load.ramp_up_end_rps)
    t0 = run.outcome.t0_ns

    def when(i: int) -> str:  # the tally is indexed as the run's requests
        at = run.wall_start + (tally.dispatched_ns(i, t0) - t0) / 1e9
        return datetime.fromtimestamp(at).isoformat()

    return {"rps_change_events": [{"rps": rps, "timestamp": when(i)}
                                  for rps, i in rate_steps(rates, load.ramp_up_start_rps)]}


def _ramp(load: LoadSpec) -> tuple | None:
    """(strategy, start, end) for the file name, as vLLM names a ramp's result."""
    if load.ramp_up_strategy is None:
        return None
    return load.ramp_up_strategy, load.ramp_up_start_rps, load.ramp_up_end_rps


def check_plots(out: OutputSpec) -> None:
    """The plots' library is there before anything runs (it is optional)."""
    from servelab.results.plots import require_matplotlib

    for flag, on in (("--plot-timeline", out.plot_timeline), ("--plot-dataset-stats", out.plot_dataset_stats)):
        if on:
            require_matplotlib(flag)


def write_plots(out: OutputSpec, tally: Tally, run: BenchRun, path: Path) -> None:
    """--plot-timeline and --plot-dataset-stats, beside the result file (vLLM's names)."""
    if out.plot_timeline:
        from servelab.results.plots import write_request_timeline

        target = path.with_suffix(".timeline.html")
        write_request_timeline(tally.records(), run.outcome.t0_ns, out.timeline_itl_thresholds_ms, target)
        print(f"servelab: request timeline written to {target}")
    if out.plot_dataset_stats:
        from servelab.results.plots import write_dataset_stats

        target = path.with_suffix(".dataset_stats.png")
        write_dataset_stats(tally.records(), target)
        print(f"servelab: dataset statistics written to {target}")


def _diagnose(result: dict, timeline: Timeline | None, tl_path: Path | None):
    """Put the timeline's summary and the diagnosis into the result's ``servelab`` section."""
    if timeline is not None:
        result["servelab"]["telemetry"] = {"timeline_file": str(tl_path) if tl_path else None,
                                           **summarize_timeline(timeline)}
    diagnosis = diagnose(evidence(facts_from_result(result), timeline))
    result["servelab"]["diagnosis"] = diagnosis.to_dict()
    return diagnosis
