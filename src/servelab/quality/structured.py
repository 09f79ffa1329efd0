"""``servelab.structured``: each constrained request's answer graded against its own constraint.

After the run, from the kept texts (nothing on the client's hot path): a ``json`` constraint is
met when the answer's first JSON value validates against the schema, a ``regex`` when the whole
answer matches, a ``choice`` when the trimmed answer is one of the choices (quality/graders.py's
``CONSTRAINT_GRADERS``). A failed request is counted apart, never as invalid. An answer that
reached its ``max_tokens`` while the constraint could still be met (``could_continue``) is counted
as ``cut``: an enforcing server's answer can be invalid only that way (a small model under a JSON
grammar may emit whitespace until max_tokens).

The verdict (``IGNORED_FROM``): invalid answers not explained by a cut are ``broken``; when at least
half of the completed constrained answers are broken, "the server seems to ignore the constraint".
Fewer: the count is reported, no name given.
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.datasets.structured import KEY, KINDS, constraint
from servelab.quality.graders import CONSTRAINT_GRADERS

IGNORED_FROM = 0.5  # invalid / completed at or above this: the server seems to ignore the constraint


@dataclass(frozen=True, slots=True)
class Graded:
    section: dict
    lines: tuple[str, ...]


def grade(request_ids: list[str], max_tokens: list[int | None], texts: list[str], errors: list[str],
          output_lens: list[int], fields: dict[str, dict], field: str = KEY) -> Graded:
    """Per request in the run's order (the lists of ``--save-detailed``); ``fields``: request id ->
    the body fields it carried (loadgen's ``request_fields``); ``field``: the request field that carried
    the constraints (``--structured-field``), recorded beside the counts (the grading is the same)."""
    counts = {k: {"valid": 0, "total": 0, "failed": 0, "cut": 0} for k in KINDS}
    grades = []
    for rid, cap, text, error, n in zip(request_ids, max_tokens, texts, errors, output_lens):
        kind_value = constraint(fields.get(rid) or {})
        if kind_value is None:
            continue
        kind, value = kind_value
        c = counts[kind]
        if error:
            c["failed"] += 1
            continue
        valid = CONSTRAINT_GRADERS[kind](value, text)
        cut = not valid and cap is not None and n >= cap and could_continue(kind, value, text)
        c["total"] += 1
        c["valid"] += valid
        c["cut"] += cut
        grades.append([rid, kind, valid])
    return _verdict({k: v for k, v in counts.items() if v["total"] or v["failed"]}, grades, field)


def could_continue(kind: str, value, text: str) -> bool:
    """An answer stopped at max_tokens that an enforcing server could still have completed: a choice
    it begins, a regex it partially matches (the ``regex`` package's partial match; without it, any),
    a JSON value its first character opens."""
    if kind == "choice":
        return any(c.startswith(text.strip()) for c in value)
    if kind == "regex":
        try:
            import regex
        except ImportError:
            return True
        return regex.fullmatch(value, text, partial=True) is not None
    return text.lstrip()[:1] == ("[" if value.get("type") == "array" else "{")


def _verdict(by_kind: dict, grades: list, field: str) -> Graded:
    total = sum(c["total"] for c in by_kind.values())
    valid = sum(c["valid"] for c in by_kind.values())
    failed = sum(c["failed"] for c in by_kind.values())
    cut = sum(c["cut"] for c in by_kind.values())
    broken = total - valid - cut  # invalid, and not explained by a cut
    verdict = ("no answers" if total == 0 else "ignored" if broken >= IGNORED_FROM * total
               else "partly invalid" if broken else "enforced")
    kinds = ", ".join(f"{k} {c['valid']}/{c['total']}" for k, c in by_kind.items())
    share = f"{valid}/{total} = {valid / total:.1%}" if total else "0/0"
    line = f"valid against their own constraint: {share} ({kinds})"
    if failed:
        line += f"; {failed} failed (not graded)"
    lines = [line]
    if broken:
        why = f"{broken} of {total} invalid (not explained by max_tokens)"
        lines.append(f"the server seems to ignore the constraint: {why}" if verdict == "ignored" else why)
    if cut:
        lines.append(f"{cut} of {total} cut at max_tokens while the constraint could still be met: give them more "
                     "output tokens (not counted against the server)")
    section = {"structured": {"valid": valid, "total": total, "failed": failed, "cut": cut, "broken": broken,
                              "verdict": verdict, "by_kind": by_kind, "grades": grades,
                              "rule": f"ignored when invalid answers not cut at max_tokens >= {IGNORED_FROM:g} x "
                                      "completed", "field": field}}
    return Graded(section, tuple(lines))
