"""The README's promises, checked: every `servelab CMD … --flag` it shows is a flag that
command has, and every repository file it points to exists."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from servelab.cli.main import COMMANDS

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def flags_of(command: str) -> set[str]:
    import importlib

    module = importlib.import_module(COMMANDS[command][0])
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    return {s for action in parser._actions for s in action.option_strings}


def shown_commands() -> list[tuple[str, list[str]]]:
    """(command, its --flags) for each `servelab CMD …` in inline code or a code block line."""
    text = README.replace("\\\n", " ")
    spans = re.findall(r"`([^`\n]+)`", text) + text.splitlines()
    out = []
    for span in spans:
        for m in re.finditer(r"servelab (\w+)((?: +[^ |#`]+)*)", span):
            if m.group(1) in COMMANDS:
                ours = re.split(r"(?:^| )--(?: |$)", m.group(2))[0]  # after a lone "--": the engine's flags
                out.append((m.group(1), re.findall(r"(?<![\w-])--[a-z][\w-]*", ours)))
    return out


@pytest.mark.parametrize("command, flags", shown_commands(), ids=lambda x: str(x))
def test_every_flag_the_readme_shows_exists(command, flags):
    known = flags_of(command)
    assert not [f for f in flags if f not in known], f"servelab {command} has no {[f for f in flags if f not in known]}"


def test_the_readme_checks_something():
    assert len(shown_commands()) >= 5  # a parser change must not leave the test above with nothing to check


def test_every_file_the_readme_names_is_in_the_repository():
    named = set(re.findall(r"`((?:docs|bench|src|scripts|tests)/[\w./-]+)`", README))
    named |= set(re.findall(r"(?<![\w/])([A-Z]+\.md)\b", README)) - {"README.md"}
    missing = sorted(n for n in named if not (ROOT / n).exists())
    assert not missing, f"the README points to files that are not here: {missing}"


def test_ci_runs_the_readmes_test_command():
    """.ci/run installs and tests exactly as the README tells a reader to (its "Two commands")."""
    shown = [x for x in README.splitlines() if x.startswith("bash scripts/setup.sh && ") and "demo" not in x]
    ci = [x for x in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines() if x.startswith("bash ")]
    assert len(shown) == 1 and ci == shown, (shown, ci)
