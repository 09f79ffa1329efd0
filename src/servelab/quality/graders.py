"""Checks of one answer against an item's known answer: the four kinds a quality file
may name, shared with the structured-output workload.

* ``answer``: the answer equals it after trimming whitespace (exact: case and punctuation count);
* ``regex``: ``re.search`` finds it anywhere in the answer;
* ``json_schema``: the answer's first JSON value (a fenced ```json block, or the text from its
  first ``{`` or ``[``) validates against the schema (with the ``jsonschema`` package);
* ``choices``: the answer's first word (case and surrounding punctuation ignored) is one of them.

A structured-output constraint is graded strictly (``CONSTRAINT_GRADERS``): ``json`` as
``json_schema``; ``regex``: the whole answer matches (``re.fullmatch``); ``choice``: the answer,
trimmed, equals one of them.
"""

from __future__ import annotations

import json
import re

from servelab.errors import InputError

KINDS = ("answer", "regex", "json_schema", "choices")
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def grade(kind: str, expected, text: str) -> bool:
    return GRADERS[kind](expected, text)


def exact(expected: str, text: str) -> bool:
    return text.strip() == expected.strip()


def search(pattern: str, text: str) -> bool:
    return re.search(pattern, text) is not None


def first_word(text: str) -> str:
    words = text.split()
    return words[0].strip(".,;:!?\"'()[]*").lower() if words else ""


def choice(choices: list[str], text: str) -> bool:
    return first_word(text) in {c.strip().lower() for c in choices}


def first_json(text: str):
    """The first JSON value in ``text`` (None when there is none)."""
    fenced = _FENCE.search(text)
    candidates = [fenced.group(1)] if fenced else []
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if starts:
        candidates.append(text[min(starts):])
    for c in candidates:
        try:
            value, _ = json.JSONDecoder().raw_decode(c.strip())
            return value
        except ValueError:
            continue
    return None


def schema(expected: dict, text: str) -> bool:
    value = first_json(text)
    if value is None:
        return False
    return not any(True for _ in validator(expected).iter_errors(value))


def validator(expected: dict):
    try:
        import jsonschema
    except ImportError:
        raise InputError("json_schema items need the jsonschema package (pip install 'servelab[quality]')") from None
    try:
        cls = jsonschema.validators.validator_for(expected)
        cls.check_schema(expected)
    except jsonschema.SchemaError as exc:
        raise InputError(f"json_schema: not a valid schema ({exc.message})") from None
    return cls(expected)


def check_expected(kind: str, expected, where: str) -> None:
    """One line when an item's expected value cannot be graded against."""
    ok = {"answer": isinstance(expected, str), "regex": isinstance(expected, str),
          "json_schema": isinstance(expected, dict),
          "choices": isinstance(expected, list) and bool(expected) and all(isinstance(c, str) for c in expected)}
    if not ok[kind]:
        need = {"answer": "a string", "regex": "a string", "json_schema": "an object",
                "choices": "a non-empty list of strings"}[kind]
        raise InputError(f"{where}: field '{kind}' must be {need}")
    if kind == "regex":
        try:
            re.compile(expected)
        except re.error as exc:
            raise InputError(f"{where}: field 'regex' is not a valid regular expression ({exc})") from None
    if kind == "json_schema":
        try:
            validator(expected)
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None


GRADERS = {"answer": exact, "regex": search, "json_schema": schema, "choices": choice}


# A structured-output constraint (servelab.structured) is stricter than a task's lenient check:
# a server that enforces it answers the constraint and nothing else.
def full_match(pattern: str, text: str) -> bool:
    return re.fullmatch(pattern, text) is not None


def one_of(choices: list[str], text: str) -> bool:
    return text.strip() in choices


CONSTRAINT_GRADERS = {"json": schema, "regex": full_match, "choice": one_of}
