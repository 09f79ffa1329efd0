"""Structured-output constraints for a share of a run's requests (``--structured-share``).

Each constrained request carries one of the committed templates below in vLLM 0.32's key,
``structured_outputs: {"json": schema} | {"regex": pattern} | {"choice": [...]}`` (read by
both /v1/completions and /v1/chat/completions; vLLM ignores the removed ``guided_*`` keys and
answers unconstrained with 200, so they are never sent), and ``ignore_eos: false``: the grammar
ends the answer, and ``ignore_eos`` would make the server generate past its end.

``--structured-field response_format`` sends a JSON schema the portable way instead, OpenAI's
``response_format: {"type": "json_schema", "json_schema": {"name", "schema", "strict": true}}``.
Checked (2026-12-05), facts only: vLLM 0.32 (its installed ``entrypoints/openai/completion/protocol.py``
and ``chat_completion/protocol.py``) reads ``response_format`` on both endpoints and turns a
``json_schema`` one into ``structured_outputs.json`` (``generate/base/protocol.py``:
``structured_outputs_from_response_format``); SGLang (``python/sglang/srt/entrypoints/openai/protocol.py``,
sgl-project/sglang) declares it on both request types (a chat request's json_schema becomes its
``json_schema`` sampling parameter unless ``strict`` is false and the chat template takes it: hence
``strict: true``), and takes a regex only as its own top-level ``regex`` field;
llama.cpp's server (``tools/server/README.md``, ggml-org/llama.cpp) documents it under
``/v1/chat/completions`` (``json_object`` or ``json_schema``), with no regex or choice form (measured
through xllamacpp: enforced on chat, dropped with 200 on /v1/completions; docs/structured.md). OpenAI's
``response_format`` has no regex or choice form either: those kinds are refused with it (flags/structured.py).

Which requests, and which template each gets, is drawn once from ``--seed`` (its own stream):
exactly round(share x n) requests, chosen by a seeded permutation; ``mix`` draws the kind per
request uniformly, then a template of that kind uniformly. The prompts are the dataset's own.
"""

from __future__ import annotations

import numpy as np

from servelab.records import SampleRequest

KINDS = ("json", "regex", "choice")
CHOICES_OF_KIND = (*KINDS, "mix")
_STREAM = 0x5CE  # keeps these draws apart from the arrivals' and the adapters' of the same seed
KEY = "structured_outputs"  # vLLM's request field
PORTABLE = "response_format"  # OpenAI's request field: JSON schemas only
FIELDS = (KEY, PORTABLE)  # --structured-field's choices, the default first

# Small on purpose: every string bounded, so an enforcing server's answer fits in a few dozen tokens.
TEMPLATES: dict[str, tuple[tuple[str, object], ...]] = {
    "json": (
        ("person", {"type": "object", "additionalProperties": False, "required": ["name", "age"],
                    "properties": {"name": {"type": "string", "maxLength": 16},
                                   "age": {"type": "integer", "minimum": 0, "maximum": 120}}}),
        ("order", {"type": "object", "additionalProperties": False, "required": ["sku", "quantity", "gift"],
                   "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
                                  "quantity": {"type": "integer", "minimum": 1, "maximum": 9},
                                  "gift": {"type": "boolean"}}}),
        ("event", {"type": "object", "additionalProperties": False, "required": ["kind", "tags"],
                   "properties": {"kind": {"enum": ["start", "stop", "pause"]},
                                  "tags": {"type": "array", "minItems": 1, "maxItems": 3,
                                           "items": {"type": "string", "maxLength": 8}}}}),
    ),
    "regex": (
        ("date", r"\d{4}-\d{2}-\d{2}"),
        ("phone", r"\(\d{3}\) \d{3}-\d{4}"),
        ("email", r"[a-z]{3,10}@[a-z]{3,8}\.(com|org|net)"),
    ),
    "choice": (
        ("sentiment", ["positive", "negative", "neutral"]),
        ("colour", ["red", "green", "blue", "yellow"]),
        ("letter", ["A", "B", "C", "D"]),
    ),
}


def body_fields(kind: str, value: object, options: dict | None = None, field: str = KEY, name: str = "") -> dict:
    """What a constrained request's body carries besides the dataset's fields; ``options``: the
    ``structured_outputs`` object of ``--extra-body`` (e.g. ``disable_any_whitespace``), kept beside;
    ``field`` PORTABLE: a JSON schema as ``response_format``, named ``name`` (the template's)."""
    if field == PORTABLE:
        if kind != "json":
            raise ValueError(f"{PORTABLE} has no {kind} form")  # flags/structured.py refuses it first
        return {PORTABLE: {"type": "json_schema", "json_schema": {"name": name or "schema", "schema": value,
                                                                   "strict": True}}, "ignore_eos": False}
    return {KEY: {**(options or {}), kind: value}, "ignore_eos": False}


def constraint(fields: dict) -> tuple[str, object] | None:
    """(kind, value) of a request's ``body_fields``, or None."""
    if (rf := fields.get(PORTABLE)) is not None:
        return "json", rf["json_schema"]["schema"]
    so = fields.get(KEY) or {}
    return next(((k, so[k]) for k in KINDS if k in so), None)


def assign(samples: list[SampleRequest], share: float, kind: str, seed: int,
           options: dict | None = None, field: str = KEY) -> dict[str, dict]:
    """request id -> its body fields, for the constrained requests only (none at share 0); ``field``:
    the request field that carries them (the draws are the same for both)."""
    n = len(samples)
    count = round(share * n)
    if count == 0:
        return {}
    rng = np.random.default_rng([seed, _STREAM])
    chosen = sorted(rng.permutation(n)[:count])
    kinds = rng.integers(0, len(KINDS), size=count) if kind == "mix" else [KINDS.index(kind)] * count
    out = {}
    for i, k in zip(chosen, kinds):
        templates = TEMPLATES[KINDS[k]]
        name, value = templates[int(rng.integers(0, len(templates)))]
        out[samples[i].request_id] = body_fields(KINDS[k], value, options, field, name)
    return out
