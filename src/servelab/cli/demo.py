"""``servelab demo`` — the whole loop on the embedded engine: four engine configs
× two workloads × 2 repeats (a study, ``servelab/study/demo.toml``), then the
comparison tables and the path of the HTML report."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=int, default=None, help="engine port (default: the demo study's, 8000)")
    p.add_argument("--out", type=Path, default=None,
                   help="study folder (default: results/demo-<time>); an existing one is resumed")
    p.add_argument("--repeats", type=int, default=None, help="repeats per config (default 2)")
    p.add_argument("--verbose", action="store_true", help="show each run's full console block")


def run(args: argparse.Namespace) -> int:
    from servelab.cli.study import run_and_report
    from servelab.errors import InputError
    from servelab.study.demo import DEMO_FILE, demo_study

    if args.repeats is not None and args.repeats < 1:
        raise InputError("--repeats must be >= 1")
    study = demo_study(args.out, args.port, args.repeats)
    folder = study.results / study.name
    print(f"servelab demo: the study {DEMO_FILE.name} → {folder}", flush=True)
    resume = ["servelab", "demo", "--out", str(folder)]
    resume += ["--port", str(args.port)] if args.port is not None else []
    resume += ["--repeats", str(args.repeats)] if args.repeats is not None else []
    return run_and_report(study, verbose=args.verbose, resume=resume)
