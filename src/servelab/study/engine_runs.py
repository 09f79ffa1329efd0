"""What one engine session needs to run measured runs into folders — and nothing more.

A study, a sweep and a tune each build one ``EngineRuns`` per engine (or per tuned
config) and hand it to ``Session``: where the results go (``results/name``), the
engine, its warm-up, the port it listens on unless it names its own, and how repeats
are numbered across engine starts. The workloads are not part of it: each run is
given its workload, so a sweep adds loads as it goes without growing a copy of
anything. ``origin`` is what defined the runs (a study file, a sweep's summary),
kept in every result beside its hash.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from servelab.engines.spec import DEFAULT_PORT
from servelab.results import layout as files
from servelab.study.entries import EngineEntry
from servelab.study.file import Study


@dataclass(frozen=True, slots=True)
class EngineRuns:
    name: str  # results go to <results>/<name>/<engine>/<workload>/<repeat>/
    results: Path
    engine: EngineEntry
    warmup: int = 4  # warm-up requests after each engine start (not measured)
    seed: int = 0  # the warm-up draws its prompts with seed + 7919: not the measured ones
    port: int = DEFAULT_PORT  # where the engine listens unless its entry names a port
    repeats: int = 1  # runs of a workload per engine start
    starts: int = 1  # engine starts; repeats are numbered 1.. across them
    origin: Path = Path()  # what defined these runs: a study file, a sweep's or tune's summary
    origin_text: str = ""  # its text, hashed into each result (``origin_sha256``)

    @property
    def total_repeats(self) -> int:
        return self.repeats * self.starts

    def start_of(self, repeat: int) -> int:
        """The engine start a repeat belongs to (start s holds (s−1)·repeats+1 … s·repeats)."""
        return (repeat - 1) // self.repeats + 1

    @property
    def origin_sha256(self) -> str:
        return hashlib.sha256(self.origin_text.encode()).hexdigest()

    @property
    def folder(self) -> Path:
        """The engine's own folder: its log and facts of the latest start."""
        return files.engine_dir(self.results, self.name, self.engine.name)

    def head(self, description: str) -> dict:
        """The head of ``study.json``: what these runs were, for a reader of the folder."""
        return {"name": self.name, "file": str(self.origin), "sha256": self.origin_sha256,
                "description": description, "repeats": self.repeats, "starts": self.starts, "seed": self.seed,
                "warmup": self.warmup}


def study_engine_runs(study: Study, engine: str, port: int | None = None) -> EngineRuns:
    """One engine of a study; ``port`` (``study run --port``) overrides the study's."""
    return EngineRuns(name=study.name, results=study.results, engine=study.engines[engine], warmup=study.warmup,
                      seed=study.seed, port=port or study.port, repeats=study.repeats, starts=study.starts,
                      origin=study.path, origin_text=study.source)
