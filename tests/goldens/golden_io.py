"""Run servelab through its CLI entry point and compare what it printed and wrote with a
golden file under ``expected/``.

Only ``servelab.cli.main.main`` is called: these goldens were generated before the layout
redesign (src/servelab/study/ -> measure/, scale/, sweep/) to check the moved code against
the code as it was, so they import no module that may move.

Regenerate with SERVELAB_REGEN_GOLDEN=1: the expected file is rewritten and the test still
fails, so a changed golden is always a reviewed change (as tests/metrics/test_console.py).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXPECTED = Path(__file__).parent / "expected"


REGENERATED: list[Path] = []  # this test's rewritten goldens; the test fails once it has written them all


def check(name: str, text: str) -> None:
    path = EXPECTED / name
    if os.environ.get("SERVELAB_REGEN_GOLDEN"):
        path.write_text(text, encoding="utf-8")
        REGENERATED.append(path)
        return
    assert path.is_file(), f"no golden {path}: generate it with SERVELAB_REGEN_GOLDEN=1"
    expected = path.read_text(encoding="utf-8")
    if text != expected and os.environ.get("SERVELAB_GOLDEN_ACTUAL"):  # a folder: what this run made, to diff
        Path(os.environ["SERVELAB_GOLDEN_ACTUAL"], name).write_text(text, encoding="utf-8")
    assert text == expected, f"{name} differs from its golden (SERVELAB_GOLDEN_ACTUAL=DIR writes what this run made)"


def fail_if_regenerated() -> None:
    written, REGENERATED[:] = list(REGENERATED), []
    if written:
        pytest.fail(f"regenerated {', '.join(p.name for p in written)}; review and rerun without SERVELAB_REGEN_GOLDEN")


def run(capsys, argv: list[str]) -> tuple[int, str, str]:
    """``servelab ARGV`` in this process: (exit code, stdout, stderr)."""
    from servelab.cli.main import main

    capsys.readouterr()  # start from nothing
    saved, sys.argv = sys.argv, ["servelab", *argv]  # as the console script sees it (provenance.argv)
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own exits
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.argv = saved
    out, err = capsys.readouterr()
    return code, out, err


def run_process(argv: list[str], cwd: Path, timeout_s: float = 120) -> tuple[int, str, str]:
    """``servelab ARGV`` in a process of its own, as a user runs it (live runs: engines,
    progress lines, signal handlers, nothing shared with the test process)."""
    import servelab

    env = {**os.environ, "PYTHONPATH": str(Path(servelab.__file__).parents[1])}  # this checkout's code
    proc = subprocess.run([sys.executable, "-m", "servelab.cli.main", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout_s)
    return proc.returncode, proc.stdout, proc.stderr


def transcript(argv: list[str], code: int, out: str, err: str | None) -> str:
    """One golden file: the command, its exit code, stdout, and stderr (None: not compared)."""
    parts = ["$ servelab " + " ".join(argv), f"--- exit {code}", "--- stdout", mask_ids(out).rstrip("\n")]
    if err is not None:
        parts += ["--- stderr", mask_ids(err).rstrip("\n")]
    return "\n".join(parts) + "\n"


# --- masks ---

def mask_ids(text: str) -> str:
    """The request-id prefix is drawn per run (bench-<8 random hex>-), as vLLM's."""
    return re.sub(r"\bbench-[0-9a-f]{8}-", "bench-<HEX>-", text)


def replace_all(text: str, values: dict[str, str]) -> str:
    """Replace each literal (a tmp path, the tokenizer's path, a port) by its placeholder,
    longest first so a path is replaced before its prefix."""
    for literal in sorted(values, key=len, reverse=True):
        text = text.replace(literal, values[literal])
    return text


# A number on its own: not part of a name ("c4", "seqs2", "P99", "max-num-seqs=4",
# "replica-0" keep their digits); thousands separators and exponents included.
NUMBER = re.compile(r"(?<![\w=<.])(?<![A-Za-z]-)\d+(?:,\d{3})*(?:\.\d+)?(?:e[-+]?\d+)?")

# Lines whose presence depends on the machine at the moment of the run, not on the code:
# the machine-share warning (other programs busy on this shared machine), the client-CPU
# warning, and their ⚠ copies in a study's comparison.
NOISY_LINE = re.compile(r"servelab: WARNING|other programs kept|the client may limit this run"
                        r"|^the machine's \d+ CPUs were")  # scale's saturated-host line: how busy the machine was


def structure(text: str) -> str:
    """A live run's output as line structure: noisy lines dropped, every number <N> (and its
    sign, when it stands alone), runs of
    spaces (table padding, which follows the numbers' widths) and of rule characters
    collapsed, trailing space removed."""
    lines = []
    for line in text.splitlines():
        if NOISY_LINE.search(line):
            continue
        line = NUMBER.sub("<N>", line)
        line = re.sub(r"(?<!\S)[-+−]<N>", "<N>", line)  # a change's sign follows the noise too
        line = re.sub(r" {2,}", " ", line)
        line = re.sub(r"([-=─])\1{2,}", r"\1\1\1", line)
        lines.append(line.rstrip())
    return "\n".join(lines)


def key_paths(value, prefix: str = "", prune: tuple[str, ...] = ()) -> set[str]:
    """Every key path of a JSON value (``a.b``, list items as ``a[].b``). Below a path
    matching one of ``prune`` (a regex, matched whole) the keys are not listed: their
    presence depends on timing (e.g. a diagnosis' evidence)."""
    paths: set[str] = set()
    if prefix and any(re.fullmatch(p, prefix) for p in prune):
        return paths
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{prefix}.{key}" if prefix else key
            paths.add(path)
            paths |= key_paths(item, path, prune)
    elif isinstance(value, list):
        for item in value:
            paths |= key_paths(item, prefix + "[]", prune)
    return paths


def files_under(folder: Path) -> list[str]:
    """Every file under ``folder``, relative to it, sorted."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def json_keys_by_name(folder: Path, prune: tuple[str, ...] = ()) -> str:
    """For each JSON file name under ``folder`` (result.json, run.json, …): the union of the
    key paths of every file of that name, one per line."""
    by_name: dict[str, set[str]] = {}
    for path in sorted(folder.rglob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        by_name.setdefault(path.name, set()).update(key_paths(data, prune=prune))
    return "\n".join(f"== {name}\n" + "\n".join(sorted(keys)) for name, keys in sorted(by_name.items())) + "\n"


def mask_json(value, masks: dict[str, str], literals: dict[str, str]):
    """A copy of a JSON value with the values at ``masks`` key paths (``a.b``) replaced by
    their placeholder, and ``literals`` replaced inside every string."""
    def walk(item, path):
        if path in masks:
            return masks[path]
        if isinstance(item, dict):
            return {k: walk(v, f"{path}.{k}" if path else k) for k, v in item.items()}
        if isinstance(item, list):
            return [walk(v, path + "[]") for v in item]
        if isinstance(item, str):
            return replace_all(item, literals)
        return item
    return walk(value, "")


def dump(value) -> str:
    return json.dumps(value, indent=1, ensure_ascii=False) + "\n"
