"""``servelab results recover DIR`` — a run killed hard (SIGKILL, OOM, power loss) turned
into a result from the records it had written (results/recover.py), marked
``"recovered": true``. Thin: parse, call, print."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    rec = sub.add_parser("recover", help="turn the records a killed run left in DIR into a result")
    rec.add_argument("dir", type=Path, metavar="DIR",
                     help="the run's results folder (its --result-dir; default of a run: the current folder); "
                          "its .servelab/ (unsaved runs' records) is looked in too")


def run(args: argparse.Namespace) -> int:
    from servelab.results.recover import recover
    from servelab.telemetry.recorder import recover_into

    return 0 if recover(args.dir, telemetry=recover_into) else 1  # nothing recovered is said in one line (recover's), and fails a script
