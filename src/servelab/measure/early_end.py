"""A run's records file from its first request to its last, and how the run ended.

Every run that measures a server streams its records to a file (results/records_file.py),
not only one saved with --save-result (an unsaved --simulate run has nothing a kill could
cost: it writes none): killed hard, it can be recovered
(``servelab results recover DIR``). A saved run's records go beside its result; an
unsaved run's to ``.servelab/`` under --result-dir (default: the current folder), where
the last one is kept as ``last.records.jsonl``. Before the run the folder is checked
(writable, room for the records expected), and a run killed there before is offered
for recovery in one line. After it, the run's ``ending`` is accounted by the one rule
in records.RunEnding, whatever ended it.
"""

from __future__ import annotations

import contextlib
import signal
from pathlib import Path

from servelab.config import BenchSpec
from servelab.errors import ServelabError
from servelab.loadgen.drive import BenchRun
from servelab.measure.drivers import indexed
from servelab.measure.result import planned
from servelab.metrics.tally import FAILED, OK, Tally
from servelab.records import RunEnding
from servelab.results import records_file
from servelab.results.recover import UNSAVED_DIR, orphans_under
LAST_RECORDS = "last.records.jsonl"


def saved(spec: BenchSpec) -> bool:
    return bool(spec.output.save_result or spec.output.append_result)


def records_dir(spec: BenchSpec) -> Path:
    """Where the run's records are written while it runs (see the module's docstring)."""
    base = Path(spec.output.result_dir or ".")
    return base if saved(spec) else base / UNSAVED_DIR


def sink(spec: BenchSpec, work, model: str) -> records_file.RecordSink:
    """The run's tally and its records file, once the folder is checked. A multi-turn run's
    tally keeps every turn's text: the run holds them anyway (its histories)."""
    out = spec.output
    requests = indexed(work)
    tally = Tally(requests, detailed=out.save_detailed or spec.multi_turn.enabled)
    if spec.simulate is not None and not saved(spec):  # no server, no waiting: nothing a kill could cost
        return records_file.RecordSink(tally)
    folder = records_dir(spec)
    offer_recovery(Path(spec.output.result_dir or "."))
    tokens = max((r.expected_output_len or 0 for r in requests[:1000]), default=0)
    records_file.check_room(folder, len(requests), tokens)
    header = {"requests_meant": len(requests), **planned(spec, model)}
    return records_file.RecordSink(tally, records_file.RecordsFile(folder, header))


def offer_recovery(folder: Path) -> None:
    """One line when a run killed in this folder left records a result can be made of."""
    found = orphans_under(folder)
    if found:
        print(f"servelab: {len(found)} run(s) killed before they finished left records in {folder}; "
              f"`servelab results recover {folder}` turns them into results", flush=True)


@contextlib.contextmanager
def discard_on_error(sink: records_file.RecordSink):
    """A run that failed (not one that ended early) leaves no records file behind."""
    try:
        yield
    except BaseException:
        if sink.file is not None:
            sink.file.discard()
        raise


def check_written(sink: records_file.RecordSink, run: BenchRun) -> None:
    """A records file that could not be written ends the run with one line; what was
    written is kept, valid to its last whole line, for ``results recover``."""
    file = sink.file
    if file is None or file.failure is None:
        return
    if run.outcome.stop_reason is None:
        run.outcome.stop_reason = "disk full"
    part = file.keep()
    raise ServelabError(f"{file.failure}: the run stopped; records up to the last whole line are in {part} "
                        f"(`servelab results recover {part.parent}` once there is room)")


def finish_unsaved(spec: BenchSpec, sink: records_file.RecordSink) -> Path | None:
    """An unsaved run's records: kept as the folder's last.records.jsonl."""
    if saved(spec) or sink.file is None:
        return None
    path = records_dir(spec) / LAST_RECORDS
    sink.file.close(path)
    return path


def ending(tally: Tally, run: BenchRun, abandoned: int = 0) -> RunEnding:
    """The run's accounting by records.RunEnding's one rule; ``abandoned``: a multi-turn
    run's turns never sent because an earlier turn of their conversation failed."""
    status = tally.col["status"]
    return RunEnding(reason(run), len(tally.requests), int((status == OK).sum()), int((status == FAILED).sum()),
                     run.outcome.not_sent + abandoned)


def reason(run: BenchRun) -> str:
    out = run.outcome
    if out.stop_reason is not None:
        return out.stop_reason
    if out.stopped_by is not None:
        return signal.Signals(out.stopped_by).name
    return "interrupted" if out.interrupted else "completed"


def line(ending: dict) -> str | None:
    """The console's one line for a run that ended early, by the shared accounting."""
    if not ending["early"]:
        return None
    sent = "" if ending["never_sent"] is None else f", {ending['never_sent']} never sent"
    return (f"servelab: ended early ({ending['reason']}): of {ending['meant']} requests {ending['completed']} "
            f"completed, {ending['failed']} failed, {ending['cut']} cut before an answer{sent}")


def section(tally: Tally, run: BenchRun, replay=None) -> dict:
    """The result's ``ending`` (and ``stop_rules`` when any were asked for); ``replay``: a
    multi-turn run's (loadgen/conversations.Replay)."""
    out = {"ending": ending(tally, run, replay.abandoned if replay is not None else 0).to_dict()}
    if run.stop_rules is not None:
        out["stop_rules"] = run.stop_rules
    return out

