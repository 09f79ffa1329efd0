"""``servelab compare``: runs, folders or a study side by side, each config against a baseline.

    servelab compare results/demo                      # a study: one table per workload
    servelab compare a.json b.json --baseline a         # loose results
    servelab compare results/demo --format md --reference vllm-blog.toml
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", help="result files, folders of results, or study folders")
    p.add_argument("--baseline", default=None, help="config the others are compared to (default: the first)")
    p.add_argument("--format", choices=("text", "md"), default="text", help="terminal text or Markdown")
    p.add_argument("--reference", type=Path, default=None,
                   help="a dated public reference (TOML/JSON: source, date, hardware, workload, numbers)")
    p.add_argument("--noise-floor", type=float, default=10.0, metavar="PCT",
                   help="throughput differences smaller than this %%, latency differences smaller than twice it, "
                        "are within noise (default %(default)s)")
    p.add_argument("--allow-simulated", action="store_true",
                   help="compare simulated runs with measured ones (refused by default)")
    p.add_argument("--output", "-o", type=Path, default=None, help="also write the tables to this file")


def run(args: argparse.Namespace) -> int:
    text = comparison_text(args.paths, args.baseline, args.format, args.reference, args.noise_floor,
                           allow_simulated=args.allow_simulated)
    print(text)
    if args.output:
        args.output.write_text(text + "\n", encoding="utf-8")
    return 0


def comparison_text(paths, baseline=None, form="text", reference=None, noise_floor_pct=10.0,
                    allow_simulated: bool = False) -> str:
    from servelab.errors import InputError
    from servelab.reports.compare import build_tables
    from servelab.reports.reference import add_reference, load_reference
    from servelab.results.runs import load_runs
    from servelab.reports.table import render_markdown, render_text

    if not 0 <= noise_floor_pct < 100:
        raise InputError("--noise-floor must be within 0..100 (percent)")
    floor = noise_floor_pct / 100
    runs = load_runs(paths)
    tables = build_tables(runs, baseline, floor, allow_simulated)
    if reference is not None:
        ref = load_reference(reference)
        for table in tables:
            base_run = next(r for r in runs if r.workload == table.workload and r.config == table.baseline)
            add_reference(table, ref, base_run)
    return (render_markdown if form == "md" else render_text)(tables, floor)
