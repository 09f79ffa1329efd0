"""``servelab optimize``'s write-up: ``optimize.md`` and ``optimize.html`` beside
``optimize.json``, read from that file alone — the loop calls it after every step (a
Ctrl-C leaves a current note) and ``servelab report results/NAME`` writes it again from a
copied folder.

It reads like a consultancy note: the answer first, then the baseline, each step (the
verdict and its evidence, the change, the measured gain against its noise band, kept or
reverted and why; simulated steps labelled SIMULATED), the final configuration as a
``vllm serve`` line beside the client's settings, the operating point, the ``servelab
scale`` command to try next, and the methodology and limits. Every table is built once
as rows of strings (a :class:`Note`, from ``report_text`` and ``report_method``): the Markdown pastes them as
pipes (``search/table``), the page (``report_page``) shows the same rows with the study report's stylesheet and
its SVG plots (``reports/``), so the two never disagree.

    html, md = write_report(Path("results/capped"))
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from servelab.errors import InputError
from servelab.optimize.report_method import limits, method
from servelab.optimize.report_text import (
    Table, all_steps, comparison_table, details, final_lines, operating_lines,
    points_table, serve_command, sim_engine, steps_table, summary,
)
from servelab.results.layout import OPTIMIZE_FILE, OPTIMIZE_HTML, OPTIMIZE_MD

SCHEMA = "servelab.optimize/1"
DEFAULT_NAME = "optimize"  # the command's default --name: a title says nothing with it
REQUIRED = ("objective", "engine", "workload", "steps", "final", "stopped_because", "budget", "noise")


@dataclass(slots=True)
class Note:
    """Everything the note says, as strings: the Markdown and the page render it, nothing else."""

    title: str
    meta: str
    summary: list[str]
    steps: Table
    details: list[dict]  # per step: heading, simulated, lines, evidence, runs
    final: list[str]
    serve_command: str
    comparison: Table
    operating: list[str]
    points: Table | None
    scale_command: str
    scale_at: str  # the load each replica is given: the operating point's, else the final client's
    method: list[tuple[str, str]]
    limits: list[str]
    simulated: bool = False  # some number in it is a prediction
    figure: str = ""  # the operating point's SVG (the page only); "" without one


def write_report(folder: Path) -> list[Path]:
    """Read ``folder/optimize.json``; write ``optimize.html`` and ``optimize.md`` beside it."""
    from servelab.optimize.report_page import operating_figure, render_html

    folder = Path(folder)
    doc = load(folder / OPTIMIZE_FILE)
    note = build_note(doc, folder / OPTIMIZE_FILE)
    note.figure = operating_figure(doc.get("operating_point"), simulated=sim_engine(doc))
    html, md = folder / OPTIMIZE_HTML, folder / OPTIMIZE_MD
    html.write_text(render_html(note), encoding="utf-8")
    md.write_text(render_markdown(note), encoding="utf-8")
    return [html, md]


def load(path: Path) -> dict:
    """optimize.json, checked enough that the note can be written: one line naming what is wrong."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: not found (a `servelab optimize` folder has one)") from None
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: unreadable: {e}") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise InputError(f"{path}: schema {found!r}, expected {SCHEMA!r}")
    missing = [k for k in REQUIRED if k not in doc]
    if missing:
        raise InputError(f"{path}: missing field {missing[0]!r}")
    return doc


def build_note(doc: dict, path: Path | str = OPTIMIZE_FILE) -> Note:
    """The note's strings; a field of the wrong shape is one line naming it."""
    try:
        return _note(doc)
    except KeyError as e:
        raise InputError(f"{path}: field {e.args[0]!r} is missing") from None
    except (TypeError, ValueError, AttributeError) as e:
        raise InputError(f"{path}: a field has the wrong shape ({e})") from None


def _note(doc: dict) -> Note:
    doc = {**doc, "final": doc.get("final") or {}}  # none yet: the loop writes the record from its first step
    simulated = sim_engine(doc) or any(s.get("simulated") for s in all_steps(doc))
    op = doc.get("operating_point")
    return Note(
        title=("SIMULATED · " if sim_engine(doc) else "") + title(doc),
        meta=f"{doc['engine']['kind']} · {doc['engine'].get('model', '?')} · started {doc.get('started', '?')} · "
             f"servelab {doc.get('servelab_version', '?')}",
        summary=summary(doc), steps=steps_table(doc), details=details(doc),
        final=final_lines(doc), serve_command=serve_command(doc),
        comparison=comparison_table(doc), operating=operating_lines(doc), points=points_table(op) if op else None,
        scale_command=(doc.get("next") or {}).get("scale_command", ""),
        scale_at=(doc.get("next") or {}).get("at", "this operating point"), method=method(doc),
        limits=limits(doc, simulated), simulated=simulated)


def title(doc: dict) -> str:
    """What was optimised: the model on its engine, then the run's name when the user chose one."""
    engine, name = doc["engine"], doc.get("name")
    model = engine.get("model") or "?"
    what = (f"Optimising {model} on the {engine['kind']} engine" if engine["kind"] != model
            else f"Optimising the {model} engine")  # a command or sim engine without a model name
    return what + (f" ({name})" if name and name != DEFAULT_NAME else "")


def render_markdown(note: Note) -> str:
    out = [f"# {note.title}", "", note.meta, "", *(f"- {line}" for line in note.summary), "",
           "The operating point's plot is in `optimize.html`.", "", "## Steps", "", note.steps.markdown(), ""]
    for d in note.details:
        out += [f"### {d['heading']}" + (" — SIMULATED" if d["simulated"] else ""), "", " ".join(d["lines"]), ""]
        out += [f"- evidence: {e}" for e in d["evidence"]]
        out += [f"- runs: {', '.join(f'`{r}`' for r in d['runs'])}"] if d["runs"] else []
        out += [""]
    out += ["## Final configuration", ""]
    out += ["```", note.serve_command, "```", ""] if note.serve_command else []
    out += [*note.final, "", note.comparison.markdown(), "", "## Operating point", "", *note.operating, ""]
    out += [note.points.markdown(), ""] if note.points else []
    out += ["## Next: N replicas", ""]
    out += ([f"Each replica at {note.scale_at}, counted in one window:", "", "```", note.scale_command, "```"]
            if note.scale_command else ["No scale command was recorded."])
    out += ["", "## Methodology and limits", "", *(f"- **{k}**: {v}" for k, v in note.method), "",
            "What these numbers do not show:", "", *(f"- {x}" for x in note.limits)]
    return "\n".join(out) + "\n"
