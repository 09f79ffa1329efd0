"""``--structured-share``, ``--structured-kind`` and ``--structured-field``: servelab's own flags
(``vllm bench serve`` has none)."""

from __future__ import annotations

import argparse

from servelab.config import AGENTIC_DATASETS
from servelab.datasets.structured import CHOICES_OF_KIND, FIELDS, PORTABLE
from servelab.errors import InputError


def add_structured_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("structured output (servelab; graded after the run on its kept answers)")
    g.add_argument("--structured-share", type=float, default=0.0, metavar="F",
                   help="this share (0..1) of the requests, exactly round(F x requests) chosen with --seed, carry "
                        "a structured-output constraint from servelab's templates in vLLM's "
                        "'structured_outputs' field (with ignore_eos false); after the run each answer is graded "
                        "against its own constraint (JSON schema: the first JSON value validates; regex: "
                        "the whole answer matches; choice: the answer is one of them) and the result's "
                        "servelab.structured counts valid / total per kind, failed requests apart, and answers cut "
                        "at max_tokens while the constraint could still be met apart; when at least half the "
                        "completed constrained answers are invalid otherwise, the line says the server seems "
                        "to ignore the constraint. Implies --save-detailed (default: %(default)s, none)")
    g.add_argument("--structured-kind", default="mix", metavar="|".join(CHOICES_OF_KIND),
                   help="which constraints: json (3 small schemas with typed fields), regex (a date, a phone "
                        "number, an e-mail address), choice (3 lists), or mix (each request draws a kind, then "
                        "a template, uniformly; default)")
    g.add_argument("--structured-field", default=FIELDS[0], metavar="|".join(FIELDS),
                   help="the request field that carries the constraint: structured_outputs (vLLM's own field; "
                        "SGLang and llama.cpp's server do not read it; default) or response_format (OpenAI's json_schema form, read by vLLM, "
                        "SGLang, llama.cpp's server and OpenAI on chat completions; vLLM and SGLang also on "
                        "completions, where llama.cpp's server ignores it): JSON schemas only, so it needs "
                        "--structured-kind json")


def structured_fields(args: argparse.Namespace) -> dict:
    """RequestSpec's fields, checked: one line for a share outside [0, 1], an unknown kind, or a kind
    the field cannot carry."""
    share, kind, field = args.structured_share, args.structured_kind, args.structured_field
    if not 0.0 <= share <= 1.0:
        raise InputError(f"--structured-share must be in [0, 1], got {share}")
    if kind not in CHOICES_OF_KIND:
        raise InputError(f"--structured-kind {kind!r}: choose from {', '.join(CHOICES_OF_KIND)}")
    if field not in FIELDS:
        raise InputError(f"--structured-field {field!r}: choose from {', '.join(FIELDS)}")
    if field == PORTABLE and kind != "json":
        raise InputError(f"--structured-field {PORTABLE} carries JSON schemas only: not with --structured-kind "
                         f"{kind}{' (the default)' if kind == 'mix' else ''}; give --structured-kind json, or "
                         f"--structured-field structured_outputs for regex and choice")
    if share > 0 and args.simulate:
        raise InputError("--structured-share needs a server: a simulated run has no answers to grade")
    if share > 0 and (args.multi_turn or args.dataset_name in AGENTIC_DATASETS):
        what = "--multi-turn" if args.multi_turn else f"--dataset-name {args.dataset_name}"
        raise InputError(f"--structured-share constrains single requests: not with {what}")
    return {"structured_share": share, "structured_kind": kind, "structured_field": field}
