"""One run's quality, judged after it ran: agreement with a reference (and the reference's
floor from its repeats) and a task score, as console lines and the result's
``servelab.quality`` section."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from servelab.errors import InputError
from servelab.quality import agreement, score
from servelab.quality.responses import Responses
from servelab.quality.tasks import Item
from servelab.results import runs

SECTION = "quality"


@dataclass(frozen=True, slots=True)
class Quality:
    lines: list[str]
    section: dict


def read_result(path: str) -> dict:
    """A reference's result file (results/runs.py reads it: the last run of an appended one);
    a file that is not there is one line naming the flag."""
    if not Path(path).is_file():
        raise InputError(f"--quality-reference {path}: no such result file")
    return runs.read_result(Path(path))


def check_references(paths) -> None:
    """Before the run: each reference is readable and kept its answers (one line if not)."""
    for path in paths:
        Responses.of_result(read_result(path), path)


def grades(items: list[Item], run: Responses) -> dict[str, bool]:
    """{prompt key: right?} for every answered request whose prompt is (or contains) an item's
    (a prompt is sent inside the chat template)."""
    by_prompt = {i.prompt: i for i in items}
    out = {}
    for key, prompt in run.prompts.items():
        item = by_prompt.get(prompt) if prompt is not None else None
        if item is None and prompt is not None:
            found = [i for p, i in by_prompt.items() if p in prompt]
            item = max(found, key=lambda i: len(i.prompt)) if found else None
        if item is not None:
            out[key] = item.right(run.texts[key])
    if not out:
        raise InputError(f"{run.name}: none of its prompts is an item of the quality tasks "
                         f"(run the bench with --quality-tasks to send them)")
    return out


def judge(result: dict, name: str, references: list[tuple[str, dict]], items: list[Item] | None,
          ratio: float = 0.99) -> Quality:
    """``references``: (name, result) of the reference run, then its repeats (the floor)."""
    run = Responses.of_result(result, name)
    lines, section = run.warnings(), {"sampling": run.sampling}
    refs = [Responses.of_result(r, n) for n, r in references]
    if refs:
        for r in refs[1:]:
            agreement.check_same_prompts(refs[0], r)
        f = agreement.floor(refs)
        a = None if run.sampled else agreement.agree(refs[0], run)
        said = agreement.verdict(run, a, f)
        lines.append(agreement.line(name, run, a, f))
        section["agreement"] = {"verdict": said} if a is None else agreement.as_dict(a, f, said)
        section["reference"] = refs[0].name
    if items is not None:
        mine = grades(items, run)
        p = None
        if refs:
            theirs = grades(items, refs[0])
            p = score.paired(theirs, mine, ratio)
        s = score.score_of(mine, run.failed)
        lines.append(score.line(name, s, p))
        section["task"] = {"right": s.right, "items": s.items, "score": s.share, "interval": list(s.interval),
                           "failed": s.failed, "graded": mine, **({} if p is None else {
                               "reference_score": p.ref_score, "paired_items": p.items, "ratio": ratio,
                               "margin": p.margin, "margin_interval": [p.low, p.high], "verdict": p.verdict})}
    return Quality(lines, {SECTION: section})
