"""What a study is made of, apart from the file that names them: an engine entry (an
engine spec and where a study may place it) and a workload (a bench spec and its name).
The study file builds them (``study.file``); the tuners (``sweep/``, ``optimize/``) build
their own, one per config or load, and run them the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from servelab.config import BenchSpec
from servelab.engines import EngineSpec


@dataclass(frozen=True, slots=True)
class EngineEntry:
    """One named engine: its spec (any kind, the embedded one too), and where the study
    may place it (``port`` None: the study's port)."""

    name: str
    spec: EngineSpec
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    port: int | None = None
    ready_timeout_s: float = 600.0
    description: str = ""
    reset_prefix_cache: bool = True
    # $ per GPU-hour where this engine runs (bench's --gpu-hour-cost; the study's default when unset):
    # its runs' results price their GPU-hours per million tokens
    gpu_hour_cost: float | None = None

    @property
    def embedded(self) -> bool:
        return self.spec.kind == "embedded"


@dataclass(frozen=True, slots=True)
class Workload:
    """One named load: its spec, parsed once when the study is read, and its flags
    (``spec.argv``) as its identity: shown, and hashed into each run's marker."""

    name: str
    spec: BenchSpec
    description: str = ""

    @property
    def argv(self) -> tuple[str, ...]:
        return self.spec.argv
