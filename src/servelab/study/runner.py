"""Run a study: each engine starts once, warms up, runs its workloads ``repeats``
times under identical load, stops; then the next engine. Resumable.

Identical load: every repeat of a workload sends the same requests (same flags,
same seed, so the same sample), at the same rate and concurrency, on an engine
whose prefix cache was emptied first (see ``session.py``, which runs each engine).

No engine outlives the study: each runs inside a ``Session`` context; a Ctrl-C
ends the run in progress without its marker and stops the engine on the way out.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from servelab.results import layout as files
from servelab.study import layout
from servelab.measure.facts import hardware
from servelab.study.engine_runs import study_engine_runs
from servelab.study.session import Session
from servelab.study.entries import EngineEntry
from servelab.study.file import RunKey, Study


@dataclass(slots=True)
class StudyOutcome:
    total: int
    done: int  # complete now, including those kept from before
    ran: int  # completed by this invocation
    failed: list[str] = field(default_factory=list)
    folder: Path | None = None

    @property
    def exit_code(self) -> int:
        return 0 if self.done == self.total else 1


class Display:
    """The study's own lines ("[study demo] engine 2/3 baseline · …"), on stdout."""

    def __init__(self, study: Study, stream=None) -> None:
        self.study, self.stream = study, stream or sys.stdout

    def say(self, text: str) -> None:
        print(f"[study {self.study.name}] {text}", file=self.stream, flush=True)

    def where(self, key: RunKey, done: int, total: int) -> str:
        engines = self.study.engine_order()
        start = f" · start {self.study.start_of(key)}/{self.study.starts}" if self.study.starts > 1 else ""
        return (f"engine {engines.index(key.engine) + 1}/{len(engines)} {key.engine}{start} · workload {key.workload}"
                f" · repeat {key.repeat}/{self.study.total_repeats} · {done} of {total} runs done")


def run_status(study: Study, key: RunKey, port: int | None = None) -> str:
    """"done", "stale", "partial" or "todo" (``layout.status``) of one run of the study."""
    return layout.status(*layout.study_run(study, key, port))


def run_study(study: Study, *, port: int | None = None, verbose: bool = False, stream=None) -> StudyOutcome:
    """Run every run of ``study`` not done yet; return what is done."""
    show = Display(study, stream)
    keys = study.runs()
    outcome = StudyOutcome(total=len(keys), done=sum(run_status(study, k) == "done" for k in keys), ran=0,
                           folder=layout.study_dir(study))
    _write_study_files(study)
    starts = f" on each of {study.starts} engine starts" if study.starts > 1 else ""
    show.say(f"{outcome.total} runs ({len(study.engine_order())} engines × their workloads × "
             f"{study.repeats} repeats{starts}); {outcome.done} done before; results in {outcome.folder}")
    for name in study.engine_order():
        pending = [k for k in study.runs(name) if run_status(study, k) != "done"]
        if not pending:
            show.say(f"engine {name}: all {len(study.runs(name))} runs done; not started")
            continue
        _run_engine(study, name, pending, port, verbose, show, outcome)
    show.say(f"{outcome.done} of {outcome.total} runs done" + (f"; failed: {', '.join(outcome.failed)}"
                                                               if outcome.failed else ""))
    return outcome


def _write_study_files(study: Study) -> None:
    folder = layout.study_dir(study)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / files.STUDY_SOURCE_FILE).write_text(study.source, encoding="utf-8")
    layout.write_json_atomic(folder / files.STUDY_FILE, study_record(study))


def study_record(study: Study) -> dict:
    """The resolved study: what each engine and workload meant, and the run order."""
    head = study_engine_runs(study, study.engine_order()[0]).head(study.description)
    return runs_record(head, study.engines.values(), study.workloads.values(), study.pairs)


def runs_record(head: dict, engines, workloads, pairs) -> dict:
    """``study.json`` of a study, sweep or tune: ``head`` (``EngineRuns.head``), then each
    engine (``EngineEntry``) and workload (``Workload``) by name, and the pairs run."""
    return {**head, "engines": {e.name: _engine_record(e) for e in engines},
            "workloads": {w.name: {"argv": list(w.argv), "description": w.description} for w in workloads},
            "pairs": [list(p) for p in pairs], "hardware": hardware()}


def _engine_record(e: EngineEntry) -> dict:
    return {"embedded": e.embedded, "kind": "vllm" if e.embedded else e.spec.kind,
            "model": "embedded" if e.embedded else e.spec.model, "args": list(e.args), "env": e.env,
            "description": e.description}


def _run_engine(study: Study, name: str, pending: list[RunKey], port, verbose, show, outcome) -> None:
    """One engine start per start that has runs left (a study of ``starts`` 1: one)."""
    for start in sorted({study.start_of(k) for k in pending}):
        _run_start(study, name, start, [k for k in pending if study.start_of(k) == start], port, verbose, show,
                   outcome)


def _run_start(study: Study, name: str, start: int, pending: list[RunKey], port, verbose, show, outcome) -> None:
    order = study.engine_order()
    which = f" (start {start}/{study.starts})" if study.starts > 1 else ""
    starting = f"engine {order.index(name) + 1}/{len(order)} {name}: starting{which} ({len(pending)} runs to do)"
    runs = study_engine_runs(study, name, port)
    with Session(runs, say=show.say, verbose=verbose, starting=starting) as session:
        session.started(study.workloads[pending[0].workload])  # start and warm up before the first run's line
        for key in pending:
            show.say(show.where(key, outcome.done, outcome.total))
            if session.run(study.workloads[key.workload], key.repeat).done:
                outcome.done += 1
                outcome.ran += 1
            else:
                outcome.failed.append(f"{key.engine}/{key.workload}/{key.repeat}")
