"""Quality rows of a comparison: each config's answers against the baseline's.

Agreement (quality/agreement.py) needs runs that kept their answers (--save-detailed): the
baseline's repeats give its floor, and each other config is judged by its least agreeing
repeat. A task score row needs runs judged with --quality-tasks (their per-item grades):
the baseline's first run is the reference, paired item by item (quality/score.py). A config
that cannot be judged gets a note saying why, never a verdict."""

from __future__ import annotations

from dataclasses import dataclass, field

from servelab.errors import InputError
from servelab.quality import agreement, score
from servelab.quality.responses import Responses
from servelab.results.runs import Run


@dataclass(slots=True)
class QualityRow:
    label: str
    cells: dict[str, str]  # config -> its figure
    versus: dict[str, str] = field(default_factory=dict)  # non-baseline config -> verdict


def _name(run: Run) -> str:
    return run.config + (f" repeat {run.repeat}" if run.repeat else "")


def rows(by_config: dict[str, list[Run]], base: str, ratio: float = 0.99) -> tuple[list[QualityRow], list[str]]:
    out, notes = [], []
    agree = agreement_row(by_config, base, notes)
    if agree is not None:
        out.append(agree)
    task = task_row(by_config, base, ratio)
    if task is not None:
        out.append(task)
    return out, notes


def agreement_row(by_config: dict[str, list[Run]], base: str, notes: list[str]) -> QualityRow | None:
    try:
        refs = [Responses.of_result(r.result, _name(r)) for r in by_config[base]]
        f = agreement.floor(refs)
    except InputError:
        return None  # the baseline kept no answers: no agreement row
    what = "identity: 1 run" if not f.pairs else f"floor over {len(refs)} runs"
    row = QualityRow("↑ agreement (identical answers)", {base: f"{f.share:.1%} ({what})"})
    for config, runs in by_config.items():
        if config == base:
            continue
        try:
            judged = [_judge(refs[0], Responses.of_result(r.result, _name(r)), f) for r in runs]
        except InputError as exc:
            notes.append(f"⚠ {config}: quality not judged ({exc})")
            continue
        said, a = min(judged, key=lambda j: -1 if j[1] is None else j[1].share)
        row.cells[config] = "-" if a is None else _agreement_text(a)
        row.versus[config] = said
    return row


def _agreement_text(a: agreement.Agreement) -> str:
    """Identical answers with their 95% Wilson interval: how little a few prompts can tell."""
    lo, hi = score.wilson(a.identical, a.paired)
    return f"{a.identical}/{a.paired} {a.share:.1%} [{lo:.0%}–{hi:.0%}], {a.prefix_share:.1%} of tokens"


def _judge(ref: Responses, run: Responses, f: agreement.Floor):
    a = None if run.sampled else agreement.agree(ref, run)
    return agreement.verdict(run, a, f), a


def _graded(run: Run) -> dict[str, bool] | None:
    return ((run.servelab.get("quality") or {}).get("task") or {}).get("graded")


def task_row(by_config: dict[str, list[Run]], base: str, ratio: float) -> QualityRow | None:
    ref = _graded(by_config[base][0])
    if ref is None:
        return None
    row = QualityRow("↑ task score", {base: _score_text(ref)})
    for config, runs in by_config.items():
        mine = _graded(runs[0])
        if config == base or mine is None:
            continue
        row.cells[config] = _score_text(mine)
        row.versus[config] = score.paired(ref, mine, ratio).verdict
    return row


def _score_text(grades: dict[str, bool]) -> str:
    s = score.score_of(grades)
    lo, hi = s.interval
    return f"{s.share:.1%} [{lo:.0%}–{hi:.0%}] of {s.items}"
