"""How a run ended, decided once from what the run saw — a stop rule (loadgen/watch.py),
the tick's reason (a full disk), a signal, a schedule cut short — and said three ways that
cannot disagree: the result's ``ending`` (records.RunEnding's one accounting), the
console's one line for a run that ended early, and the exit code."""

from __future__ import annotations

import signal

from servelab.loadgen.values import BenchRun
from servelab.metrics.tally import FAILED, OK, Tally
from servelab.records import RunEnding


def reason(run: BenchRun) -> str:
    """Why the run ended: the stop rule that ended it, else the tick's reason, else the
    signal's name, else "interrupted" (a schedule cut short) or "completed"."""
    if run.stop_rule is not None:
        return run.stop_rule
    if run.ticked is not None:
        return run.ticked
    if run.stopped_by is not None:
        return signal.Signals(run.stopped_by).name
    return "interrupted" if run.outcome.interrupted else "completed"


def ending(tally: Tally, run: BenchRun, abandoned: int = 0) -> RunEnding:
    """The run's accounting by records.RunEnding's one rule; ``abandoned``: a multi-turn
    run's turns never sent because an earlier turn of their conversation failed."""
    status = tally.col["status"]
    return RunEnding(reason(run), len(tally.requests), int((status == OK).sum()), int((status == FAILED).sum()),
                     run.outcome.not_sent + abandoned)


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


def exit_code(run: BenchRun, completed: int) -> int:
    """128 + the signal that stopped the run (Ctrl-C 130, SIGTERM 143); 1 when nothing
    completed or a circuit breaker ended it (--stop-on-errors/-error-rate: the server was
    failing); a run ended by --stop-when-saturated (or a full disk) did not fail by a signal."""
    said = run.stop_rule or run.ticked
    if said in ("errors", "error rate"):
        return 1
    if run.outcome.interrupted and said is None:
        return 128 + (run.stopped_by or signal.SIGINT)
    return 1 if completed == 0 else 0
