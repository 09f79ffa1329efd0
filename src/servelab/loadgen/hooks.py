"""What a run calls back while it goes, chosen once per bench (measure/run.py) and handed
to whichever driver runs it, in one value: the t0 hook, the tick, the live panel's glance,
the display, and how soon each record must be made.

``started(counters)`` is the one t0 hook, with one signature everywhere: a run in this
process, a client worker and a Ray shard call it at their t0 with their live counters;
it may block (a shared start) and return the absolute t0 to start at.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from servelab.loadgen.pacer import Counters


class Display(Protocol):
    """What the run shows while it goes (loadgen/progress.Progress, loadgen/live.Panel)."""

    def start(self, counters: Counters) -> None: ...

    def stop(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Hooks:
    # at t0, with the live counters (telemetry's samplers, a shared start): may return an absolute t0
    on_start: Callable[[Counters], int | None] | None = None
    # every TICK_S while the run goes on (the records file's flush): a reason to end it, or None
    tick: Callable[[], str | None] | None = None
    # the live panel's glance at each response made in this process (loadgen/glance.py)
    glance: object | None = None
    display: Display | None = None  # started at t0, after on_start; stopped by whoever chose it
    # make each record no later than this after its response ended (loadgen/digest.py); None: as it comes
    digest_age_s: float | None = None

    def started(self, counters: Counters) -> int | None:
        """The run is at t0: the caller's hook (it may wait for a shared start), then the display."""
        t0 = self.on_start(counters) if self.on_start is not None else None
        if self.display is not None:
            self.display.start(counters)
        return t0
