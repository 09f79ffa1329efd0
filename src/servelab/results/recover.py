"""A run killed hard, turned into a result: ``servelab results recover DIR``.

A run killed before it could finish (SIGKILL, OOM, power loss) leaves its records file's
hidden part and its sidecar (results/records_file.py) in the folder it wrote to. This
module reads them back — every whole, valid line; a line cut by the kill ends the
records — rebuilds the records, and writes the result the run would have written, with
``"recovered": true`` in its ``servelab`` section and its requests accounted by
records.RunEnding's rule: of the requests meant without a record, those the run had not
sent by its last count in the sidecar (results/records_file.py: written every ``FLUSH_S``)
are ``never_sent``, the rest ``cut`` (a run whose sidecar has no count: all ``cut`` and
``never_sent`` null, not known). The records get their
final name beside it. Only a part whose writer is gone is touched: a running run's is not.

A recovered result is flagged and never counts as a finished study repeat
(study/layout.py): a resumed study reruns it.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

from servelab.errors import InputError
from servelab.metrics.summary import NS_PER_MS, summarize_tally
from servelab.metrics.tally import FAILED, OK, Tally
from servelab.records import RequestRecord, RunEnding
from servelab.results import store
from servelab.results.records_file import FLUSH_S, PART_PREFIX, PART_SUFFIX, sidecar_of, write_atomic

RECOVERED = "killed (recovered)"
UNSAVED_DIR = ".servelab"  # under a results folder: unsaved runs' records (measure/sink.py)


def orphans(folder: str | Path) -> list[Path]:
    """The record parts in ``folder`` whose run is gone (its pid no longer alive)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = []
    for part in sorted(folder.glob(f"{PART_PREFIX}*{PART_SUFFIX}")):
        header = _header(part)
        if header is not None and not _alive(int(header.get("pid", 0))):
            found.append(part)
    return found


def orphans_under(folder: str | Path) -> list[Path]:
    """A results folder's orphans: its own, and its unsaved runs' (``.servelab/``)."""
    return orphans(folder) + orphans(Path(folder) / UNSAVED_DIR)


def _header(part: Path) -> dict | None:
    try:
        header = json.loads(sidecar_of(part).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return header if isinstance(header, dict) and header.get("servelab_records") == 1 else None


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def read_lines(part: Path) -> list[dict]:
    """Every whole, valid record line, in order; the first bad one (a cut tail) ends them."""
    out = []
    with open(part, "rb") as f:
        for raw in f:
            if not raw.endswith(b"\n"):
                break
            try:
                line = json.loads(raw)
            except ValueError:
                break
            if not isinstance(line, dict) or "request_id" not in line:
                break
            out.append(line)
    return out


def record_from_line(d: dict) -> RequestRecord:
    """The record a line was written from (instants in ns from t0, to 100 ns)."""
    ns = lambda ms: int(round(ms * NS_PER_MS))  # noqa: E731
    return RequestRecord(
        request_id=str(d["request_id"]), prompt_len=int(d["prompt_len"]),
        expected_output_len=d.get("expected_output_len"), intended_ns=ns(d["intended_send_ms"]),
        dispatched_ns=ns(d["dispatched_ms"]), sent_ns=ns(d["sent_ms"]), done_ns=ns(d["done_ms"]),
        token_ns=tuple(ns(t) for t in d.get("token_ms") or ()), token_counts=tuple(d.get("token_counts") or ()),
        output_tokens=int(d.get("output_tokens") or 0), output_tokens_source=d.get("output_tokens_source", "usage"),
        prompt_len_source=d.get("prompt_len_source", "dataset"), error=d.get("error"),
        http_status=d.get("http_status"), finished=bool(d.get("finished", True)))


def recover(folder: str | Path, say=print, telemetry=None) -> list[Path]:
    """Every orphaned run in ``folder`` as a result; returns the results written. ``telemetry``
    (telemetry/recorder.py's ``recover_into``, passed by the caller: this layer does not read the
    scraper's files) rebuilds a run's timeline beside its result: (sidecar header, folder,
    records, end ns from t0, result path, date) -> the result's telemetry section, or None."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"results recover: {folder} is not a folder")
    parts = orphans_under(folder)
    if not parts:
        say(f"servelab: nothing to recover in {folder} (no records left by a killed run)")
        return []
    return [path for part in parts if (path := recover_one(part, folder, say, telemetry)) is not None]


def recover_one(part: Path, folder: Path, say=print, telemetry=None) -> Path | None:
    """One killed run's records → its result (in ``folder``) and its named records file."""
    header = _header(part)
    lines = read_lines(part)
    if not lines or "wall_start" not in header:
        gone = discard(part, header)
        say(f"servelab: {part.name}: no request had finished when the run was killed; nothing to recover "
            f"(removed what it left: {', '.join(gone)})")
        return None
    tally, made = Tally(lines), [record_from_line(line) for line in lines]
    for i, record in enumerate(made):
        tally.add(i, record)
    result, date = _result(header, tally, lines)
    path, records = _paths(header, folder, date)
    result["servelab"]["records_file"] = str(records)
    section = telemetry(header, part.parent, made, max(r.done_ns for r in made), path, date) if telemetry else None
    if section is not None:
        result["servelab"]["telemetry"] = section
    os.truncate(part, _whole_bytes(part, len(lines)))  # a cut tail is not a record: whole lines only
    os.replace(part, records)
    write_atomic(path, store.json_chunks(result))
    sidecar_of(part).unlink(missing_ok=True)
    ending = result["servelab"]["ending"]
    unsent = "" if ending["never_sent"] is None else \
        f", {ending['never_sent']} never sent by the run's last count, written every {FLUSH_S:g} s"
    timeline = f"; timeline in {section['timeline_file']}" if section else ""
    say(f"servelab: recovered {ending['completed']} completed and {ending['failed']} failed of "
        f"{ending['meant']} requests ({ending['cut']} sent without a record{unsent}) into {path}; "
        f"records in {records}{timeline}")
    return path


def discard(part: Path, header: dict) -> list[str]:
    """A killed run with nothing to recover: its part, its sidecar and the scrape file its
    header names (the telemetry of a run that never finished a request) are removed, so the
    folder does not offer the same empty recovery at every run; returns their names."""
    scrape = str((header.get("telemetry") or {}).get("scrape_file") or "")
    files = [part, sidecar_of(part), *([part.parent / Path(scrape).name] if scrape else [])]
    gone = []
    for path in files:
        try:
            path.unlink()
        except OSError:
            continue
        gone.append(path.name)
    return gone


def _whole_bytes(part: Path, n: int) -> int:
    """The length of the first ``n`` lines: what stays of the part."""
    size = 0
    with open(part, "rb") as f:
        for _ in range(n):
            size += len(f.readline())
    return size


def _result(header: dict, tally: Tally, lines: list[dict]) -> tuple[dict, str]:
    """The result the run would have written, over what it recorded."""
    status = tally.col["status"]
    meant = int(header.get("requests_meant", len(lines)))
    if header.get("requests_drawn_ahead"):  # recycled lanes: only the sessions taken were meant, the sent
        meant = max(int(header.get("sent") or 0), len(lines))
    ending = RunEnding(RECOVERED, meant, int((status == OK).sum()), int((status == FAILED).sum()),
                       _never_sent(header.get("sent"), meant, len(lines)))
    end_ns = max(int(round(x["done_ms"] * NS_PER_MS)) for x in lines)
    summary = summarize_tally(tally, end_ns, header.get("metric_percentiles") or [99.0],
                              header.get("goodput") or None)
    date = datetime.fromtimestamp(header["wall_start"]).strftime("%Y%m%d-%H%M%S")
    head = {**header["head"], "date": date}
    extra = {"version": header.get("servelab_version"), "recovered": True, "ending": ending.to_dict(),
             "wall_start": datetime.fromtimestamp(header["wall_start"]).isoformat(timespec="milliseconds"),
             "t0_perf_ns": header.get("t0_perf_ns"), "interrupted": True, "not_sent": ending.never_sent,
             "flush": header.get("flush"), "argv": header.get("argv")}
    metrics = header.get("percentile_metrics") or ["ttft", "tpot", "itl"]
    result = store.build_result(head=head, summary=summary, tally=tally, selected=metrics, save_detailed=False,
                                extra=extra)
    return result, date


def _never_sent(sent, meant: int, recorded: int) -> int | None:
    """The requests not sent by the run's last count (None: no count); every record was sent."""
    if sent is None:
        return None
    return max(0, meant - max(int(sent), recorded))


def _paths(header: dict, folder: Path, date: str) -> tuple[Path, Path]:
    """Where the run would have put its result (its own folder), and its records beside it."""
    f = header["result_file"]
    rate = float(f["request_rate"])
    ramp = tuple(f["ramp"]) if f.get("ramp") else None
    name = f["result_filename"] if header.get("saved") else None
    path = store.result_filename(f["label"], f["backend"], rate, f["max_concurrency"], f["model_id"], date,
                                 name, str(folder), ramp)
    return path, store.records_path(path, date, bool(header.get("append")))
