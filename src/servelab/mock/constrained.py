"""A constrained request's answer: the mock honours structured outputs, as vLLM does.

vLLM 0.32 reads ``structured_outputs: {"json": schema} | {"regex": pattern} | {"choice": [...]}``
on /v1/completions and /v1/chat/completions, and on both a ``response_format`` of type ``json_schema``
(OpenAI's form, ``--structured-field response_format``), which overrides ``structured_outputs``' json
(its ``structured_outputs_from_response_format``). The mock answers with one text valid against the constraint, drawn from the
prompt's key so the same prompt gets the same text, split into tokens of up to four characters;
a text longer than ``max_tokens`` is cut there (``finish_reason`` "length"), as a real server's
would be. ``MockConfig.ignore_constraints`` plays a server that ignores them (its usual words).

The instance generator covers what a benchmark's constraints use: JSON schema objects, arrays,
strings (``maxLength``, ``pattern``, ``enum``), integers and numbers (``minimum``/``maximum``),
booleans, ``const``; regular expressions of literals, classes, repeats, groups and alternatives.
Anything else gives None: the request is answered unconstrained and the truth says so.
"""

from __future__ import annotations

import json
import re

try:  # the stdlib's regex parser: one source of truth for what a pattern means
    import re._parser as sre_parse  # Python >= 3.11
    import re._constants as sre_c
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as sre_c
    import sre_parse

KINDS = ("json", "regex", "choice")
TOKEN_CHARS = 4  # characters per mock token of a constrained answer


def constraint_of(body: dict) -> tuple[str, object] | None:
    """(kind, value) of the request's constraint, or None: a ``response_format`` json_schema first, as
    vLLM lets it override ``structured_outputs``."""
    rf = body.get("response_format")
    if isinstance(rf, dict) and rf.get("type") == "json_schema":
        schema = (rf.get("json_schema") or {}).get("schema")
        if isinstance(schema, dict):
            return "json", schema
    so = body.get("structured_outputs")
    if isinstance(so, dict):
        for kind in KINDS:
            if so.get(kind) is not None:
                value = so[kind]
                return kind, (json.loads(value) if kind == "json" and isinstance(value, str) else value)
    return None


def valid_text(kind: str, value: object, pick: int) -> str | None:
    """A text valid against the constraint (``pick`` chooses among the options), or None."""
    try:
        if kind == "choice":
            return str(value[pick % len(value)]) if isinstance(value, list) and value else None
        if kind == "regex":
            return _from_pattern(sre_parse.parse(value), pick)
        instance = _instance(value, pick)
        return None if instance is _NONE else json.dumps(instance, separators=(",", ":"))
    except (TypeError, ValueError, KeyError, IndexError, re.error, RecursionError):
        return None


def tokens_of(text: str) -> tuple[str, ...]:
    """The text as mock tokens of up to TOKEN_CHARS characters (joined: the text exactly)."""
    return tuple(text[i:i + TOKEN_CHARS] for i in range(0, len(text), TOKEN_CHARS)) or ("",)


_NONE = object()  # a schema the generator does not cover


def _instance(schema: dict, pick: int):
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][pick % len(schema["enum"])]
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        out = {}
        for i, (name, sub) in enumerate(props.items()):
            if name in schema.get("required", ()) or not schema.get("required"):
                value = _instance(sub, pick + i)
                if value is _NONE:
                    return _NONE
                out[name] = value
        return out
    if kind == "array":
        n = max(schema.get("minItems", 1), min(schema.get("maxItems", 2), 2))
        items = [_instance(schema.get("items", {"type": "string"}), pick + i) for i in range(n)]
        return _NONE if _NONE in items else items
    if kind == "string":
        if "pattern" in schema:
            return _from_pattern(sre_parse.parse(schema["pattern"]), pick)
        words = ("alpha", "bravo", "delta", "echo")
        return words[pick % len(words)][:schema.get("maxLength", 5)].ljust(schema.get("minLength", 0), "x")
    if kind in ("integer", "number"):
        lo, hi = schema.get("minimum", 0), schema.get("maximum", 100)
        return int(lo) + pick % (int(hi) - int(lo) + 1)
    if kind == "boolean":
        return pick % 2 == 0
    return _NONE


_CLASSES = {sre_c.CATEGORY_DIGIT: "0123456789", sre_c.CATEGORY_WORD: "abcxyz019_",
            sre_c.CATEGORY_SPACE: " "}


def _from_pattern(parsed, pick: int) -> str:
    """One string the parsed pattern matches in full (raises ValueError for what it does not cover)."""
    out = []
    for i, (op, av) in enumerate(parsed):
        out.append(_piece(op, av, pick + i))
    return "".join(out)


def _piece(op, av, pick: int) -> str:
    if op is sre_c.LITERAL:
        return chr(av)
    if op is sre_c.IN:
        return _one_of(av, pick)
    if op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT):
        lo, hi, sub = av
        n = max(lo, 1) if hi is sre_c.MAXREPEAT or hi >= 1 else 0
        return "".join(_from_pattern(sub, pick + j) for j in range(min(n, hi)))
    if op is sre_c.SUBPATTERN:
        return _from_pattern(av[-1], pick)
    if op is sre_c.BRANCH:
        branches = av[1]
        return _from_pattern(branches[pick % len(branches)], pick)
    if op is sre_c.AT:
        return ""
    if op is sre_c.ANY:
        return "a"
    raise ValueError(f"regex element {op} not covered")


def _one_of(items, pick: int) -> str:
    chars: list[str] = []
    for op, av in items:
        if op is sre_c.NEGATE:
            raise ValueError("negated classes not covered")
        if op is sre_c.LITERAL:
            chars.append(chr(av))
        elif op is sre_c.RANGE:
            chars.extend(chr(c) for c in range(av[0], min(av[1], av[0] + 9) + 1))
        elif op is sre_c.CATEGORY and av in _CLASSES:
            chars.extend(_CLASSES[av])
        else:
            raise ValueError(f"class element {op} not covered")
    return chars[pick % len(chars)]
