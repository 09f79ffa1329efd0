"""``servelab diagnose RUN`` — what limits this run, with evidence, and what to try next.

RUN is a result JSON written by ``servelab bench --save-result`` (or a folder
holding one); its timeline is read from beside it. Thin: parse, call, print.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from servelab.errors import InputError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", type=Path, metavar="RUN", help="a result JSON, or a folder holding one")
    p.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    p.add_argument("--plot", type=Path, metavar="DIR", default=None,
                   help="also write timeline plots (PNG) into DIR")
    p.add_argument("--max-num-seqs", type=int, default=None,
                   help="the engine's --max-num-seqs, when the result does not say")
    p.add_argument("--max-num-batched-tokens", type=int, default=None,
                   help="the engine's --max-num-batched-tokens, when the result does not say")


def run(args: argparse.Namespace) -> int:
    from servelab.diagnose.run import diagnose_run, load_run
    from servelab.diagnose.verdict import render

    saved = load_run(args.run)
    diagnosis = diagnose_run(saved, args.max_num_seqs, args.max_num_batched_tokens)
    if args.json:
        print(json.dumps({"run": str(saved.result_path), "timeline": _str(saved.timeline_path),
                          **diagnosis.to_dict()}, indent=2))
    else:
        print(render(diagnosis))
    if args.plot is not None:
        _plot(saved, args.plot, quiet=args.json)
    return 0


def _plot(saved, out_dir: Path, quiet: bool) -> None:
    from servelab.reports.timeline_plots import plot_timeline

    if saved.timeline is None:
        raise InputError(f"{saved.result_path}: no timeline beside it to plot (was telemetry off?)")
    try:
        paths = plot_timeline(saved.timeline, out_dir)
    except OSError as exc:  # DIR is a file, or not writable
        raise InputError(f"--plot {out_dir}: cannot write plots there ({exc.strerror or exc})") from None
    if not quiet:
        print("plots: " + ", ".join(str(p) for p in paths))


def _str(path) -> str | None:
    return None if path is None else str(path)
