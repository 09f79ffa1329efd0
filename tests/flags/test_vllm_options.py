"""Every option of the installed ``vllm bench serve`` is a ``servelab bench`` option,
with vLLM's default and choices (a drop-in must not stop at argparse)."""

from __future__ import annotations

import argparse

import pytest

from servelab.config import AGENTIC_DATASETS, DATASET_NAMES

from servelab.spec_checks import lora_rule
from servelab.flags.bench_serve import add_bench_arguments

# Defaults that differ on purpose, each with its reason (the README lists them too).
DEFAULT_DIFFERS = {
    "request_id_prefix": "vLLM draws bench-<8 hex>- when the parser is built; servelab per run",
    "percentile_metrics": "vLLM's None means ttft,tpot,itl for generation, the only task servelab runs",
    "endpoint": "vLLM's /v1/completions even for openai-chat; servelab's None is the backend's own path",
    "port": "vLLM's None means 8000 (its join_host_port); servelab writes 8000",
}

# Choices servelab extends on purpose: vLLM's own must all still be accepted (checked by the rule's parser).
CHOICES_EXTENDED = {
    "lora_assignment": ("uniform, identical, distinct and zipf:ALPHA besides vLLM's two", lora_rule),
    "dataset_name": ("weka and agentic (agentic sessions) besides vLLM's",
                     lambda name: (name if name in DATASET_NAMES + AGENTIC_DATASETS else None,)),
}


@pytest.fixture(scope="module")
def vllm_parser() -> argparse.ArgumentParser:
    serve = pytest.importorskip("vllm.benchmarks.serve", reason="vLLM is not installed in this environment")
    parser = argparse.ArgumentParser(add_help=False)
    serve.add_cli_args(parser)
    return parser


@pytest.fixture(scope="module")
def ours() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(add_help=False)
    add_bench_arguments(parser)
    return parser


def options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {o: a for a in parser._actions for o in a.option_strings if o.startswith("--") and o != "--help"}


def test_every_vllm_option_is_known(vllm_parser, ours):
    missing = sorted(set(options(vllm_parser)) - set(options(ours)))
    assert not missing, f"{len(missing)} vllm bench serve options servelab bench does not know: {missing}"


def test_shared_options_keep_vllms_defaults_and_choices(vllm_parser, ours):
    mine = options(ours)
    wrong = []
    for opt, theirs in options(vllm_parser).items():
        here = mine.get(opt)
        if here is None or theirs.dest in DEFAULT_DIFFERS:
            continue
        if here.default != theirs.default and str(here.default) != str(theirs.default):
            wrong.append(f"{opt} default {here.default!r} != vLLM's {theirs.default!r}")
        if theirs.dest in CHOICES_EXTENDED:
            _, accepts = CHOICES_EXTENDED[theirs.dest]
            wrong += [f"{opt} refuses vLLM's {c!r}" for c in theirs.choices if accepts(c)[0] != c]
        elif theirs.choices and set(here.choices or ()) != set(theirs.choices):  # vLLM builds some from a set
            wrong.append(f"{opt} choices {here.choices} != vLLM's {list(theirs.choices)}")
    assert not wrong, "\n".join(wrong)


def test_every_bench_option_has_help(ours):
    bare = sorted(o for o, a in options(ours).items() if not a.help)
    assert not bare, f"bench options without help text: {bare}"
