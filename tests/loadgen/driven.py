"""One spec's run through its driver, as ``servelab bench`` runs it (measure/drivers.py), for the
load generator's tests: prepared, recorded into a tally, finished (its after-run hook too)."""

from __future__ import annotations

from dataclasses import dataclass

from servelab.loadgen.hooks import Hooks
from servelab.measure.drivers import DRIVERS, Bench, DriverRun
from servelab.measure.run import _prepare
from servelab.measure.target import bench_config
from servelab.metrics.tally import Tally
from servelab.results.store import RecordSink


@dataclass(frozen=True)
class Driven:
    work: object  # what the driver sent (a Sessions, for the session tests)
    tokenizer: object
    drove: DriverRun
    tally: Tally


def drive(spec, *, mock=None, work=None, tick=None) -> Driven:
    """``spec`` sent by its driver to ``spec.server``. ``mock``: its truth is reset once the work is
    prepared (the run's own requests only); ``work``: sent instead of what ``spec`` prepares;
    ``tick(sink)``: the run's tick, reading what was recorded (a stop rule)."""
    kind = DRIVERS[spec.driver]
    tokenizer, prepared = _prepare(spec, kind, "mock")
    work = prepared if work is None else work
    sink = RecordSink(Tally(kind.requests(work)))
    if mock is not None:
        mock.reset_truth()
    hooks = Hooks(tick=tick(sink)) if tick else Hooks()
    drove = kind.run(Bench(spec, bench_config(spec, "mock"), work, tokenizer, hooks), sink).finished(None, {})
    if drove.drawn is not None:  # as measure/run.py: recycled lanes' sessions never taken were not the run's
        sink.tally.keep(drove.drawn)
    return Driven(work, tokenizer, drove, sink.tally)
