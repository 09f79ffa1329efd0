"""An engine session: one engine of a study, started once, then runs one at a time,
each chosen after the last (a sweep's next load, a bisection's midpoint).

Each run is a study run — same folder layout, same ``run.json`` marker, same
prefix-cache reset and warm-up (``runner``'s own functions do the work) — so a
rerun of the same sweep or tune keeps what is done. The engine starts only when
a run is not done yet: a fully resumed session starts nothing.

    with Session(study, "embedded", say=print) as session:
        run = session.run(Workload("c8", argv))   # kept from before, or measured now
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from servelab.engines import start_engine
from servelab.study import layout, runner
from servelab.study.facts import engine_context, engine_facts, footprint_gib
from servelab.study.spec import RunKey, Study, Workload


@dataclass(frozen=True, slots=True)
class SessionRun:
    key: RunKey
    folder: Path
    result: dict | None  # the result JSON; None when the run wrote none
    done: bool  # its marker is written (complete)
    kept: bool  # done before this session: not run again


class Display:
    """``runner._run_one`` reports through ``.say``; the prefix names the sweep or tune."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say


class Session:
    def __init__(self, study: Study, engine: str, say: Callable[[str], None] = print,
                 port: int | None = None, verbose: bool = False) -> None:
        self.study, self.name, self.port, self.verbose = study, engine, port, verbose
        self.show = Display(say)
        self.engine = None
        self.facts: dict = {}

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        if self.engine is not None:
            self.engine.stop()
            self.engine = None

    def add(self, workload: Workload) -> None:
        """Make ``workload`` part of the study (its flags go into the run's config hash)."""
        if self.study.workloads.get(workload.name) == workload:
            return
        pairs = self.study.pairs if (self.name, workload.name) in self.study.pairs else \
            (*self.study.pairs, (self.name, workload.name))
        self.study = dataclasses.replace(self.study, workloads={**self.study.workloads, workload.name: workload},
                                         pairs=pairs)

    def is_done(self, workload: Workload, repeat: int = 1) -> bool:
        self.add(workload)
        return layout.is_done(self.study, RunKey(self.name, workload.name, repeat))

    def run(self, workload: Workload, repeat: int = 1) -> SessionRun:
        """The run's result: read back when done before, else measured now."""
        self.add(workload)
        key = RunKey(self.name, workload.name, repeat)
        folder = layout.run_dir(self.study, key)
        if layout.is_done(self.study, key):
            return SessionRun(key, folder, read_result(folder), True, True)
        engine = self.started(key)
        entry = self.study.engines[self.name]
        done = runner._run_one(self.study, key, engine, self.facts, entry, self.verbose, self.show)
        if not done:
            runner._check_alive(engine)  # no completed request: a dead engine ends the session
        return SessionRun(key, folder, read_result(folder), done, False)

    def started(self, first: RunKey):
        """The engine, started (and warmed up with ``first``'s workload) if it is not yet."""
        if self.engine is None:
            self.engine = self._start(first)
        return self.engine

    def _start(self, first: RunKey):
        entry = self.study.engines[self.name]
        spec = runner.resolve_spec(entry, self.port or entry.port or self.study.port)
        folder = layout.engine_dir(self.study, self.name)
        self.show.say(f"engine {self.name}: starting")
        engine = start_engine(spec, folder)
        try:
            self.facts = {**engine_context(engine), **engine_facts(engine),
                          "log_ready_bytes": runner._size(engine.log_path)}
            runner._warm_up(self.study, engine, first, folder, self.show)
            self.facts["footprint_gib"] = footprint_gib(engine)
            layout.write_json_atomic(folder / "engine.json", self.facts)
        except BaseException:
            engine.stop()
            raise
        return engine


def read_result(folder: Path) -> dict | None:
    try:
        return json.loads((folder / layout.RESULT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
