"""A run's sink — its tally and its records file — from its first request to its last.

Every run that measures a server streams its records to a file (results/records_file.py),
not only one saved with --save-result (an unsaved --simulate run has nothing a kill could
cost: it writes none): killed hard, it can be recovered
(``servelab results recover DIR``). A saved run's records go beside its result; an
unsaved run's to ``.servelab/`` under --result-dir (default: the current folder), where
the last one is kept as ``last.records.jsonl``. Before the run the folder is checked
(writable, room for the records expected), and a run killed there before is offered
for recovery in one line. How the run ended is measure/ending.py's.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from servelab.config import BenchSpec
from servelab.errors import ServelabError
from servelab.measure.drivers import DriverKind
from servelab.measure.result import planned
from servelab.metrics.tally import Tally
from servelab.results import records_file
from servelab.results.recover import UNSAVED_DIR, orphans_under
LAST_RECORDS = "last.records.jsonl"


def saved(spec: BenchSpec) -> bool:
    return bool(spec.output.save_result or spec.output.append_result)


def records_dir(spec: BenchSpec) -> Path:
    """Where the run's records are written while it runs (see the module's docstring)."""
    base = Path(spec.output.result_dir or ".")
    return base if saved(spec) else base / UNSAVED_DIR


def sink(spec: BenchSpec, kind: DriverKind, work, model: str, telemetry: dict | None = None) -> records_file.RecordSink:
    """The run's tally and its records file, once the folder is checked. A multi-turn run's
    tally keeps every turn's text: the run holds them anyway (its histories). ``telemetry``:
    where the run's scrape file is (telemetry/recorder.py), for a recovery to rebuild its timeline."""
    out = spec.output
    requests = kind.requests(work)
    tally = Tally(requests, detailed=out.save_detailed or kind.work == "conversations")
    if not kind.served and not saved(spec):  # no server, no waiting: nothing a kill could cost
        return records_file.RecordSink(tally)
    folder = records_dir(spec)
    offer_recovery(Path(spec.output.result_dir or "."))
    tokens = max((r.expected_output_len or 0 for r in requests[:1000]), default=0)
    records_file.check_room(folder, len(requests), tokens)
    # recycled lanes (datasets/agentx.py): the requests meant are those of the sessions taken, known
    # at the end; a recovery counts the ones the run had sent (results/recover.py)
    drawn = {"requests_drawn_ahead": True} if getattr(work, "until_s", None) is not None else {}
    header = {"requests_meant": len(requests), **drawn, **planned(spec, model),
              **({"telemetry": telemetry} if telemetry else {})}
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


def check_written(sink: records_file.RecordSink) -> None:
    """A records file that could not be written ends the run with one line; what was
    written is kept, valid to its last whole line, for ``results recover``."""
    file = sink.file
    if file is None or file.failure is None:
        return
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
