"""``servelab report STUDY_DIR``: one self-contained HTML page (and Markdown) for a study.

Memory budget bars, throughput bars, TTFT/ITL distributions, requests in flight
per run, the comparison tables, and a generated "Methodology and limits". A `servelab
scale` folder gets its own page again, a `servelab optimize` folder its note
(optimize.md and optimize.html, from optimize.json).
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("folder", type=Path, help="a study's results folder (results/<study>)")
    p.add_argument("--baseline", default=None, help="config the others are compared to (default: the first)")
    p.add_argument("--noise-floor", type=float, default=10.0, metavar="PCT",
                   help="throughput differences smaller than this %%, latency differences smaller than twice it, "
                        "are within noise (default %(default)s)")
    p.add_argument("--allow-simulated", action="store_true",
                   help="report simulated runs beside measured ones (refused by default)")


def run(args: argparse.Namespace) -> int:
    from servelab.errors import InputError
    from servelab.reports.report import write_report

    if not args.folder.is_dir():
        raise InputError(f"{args.folder} is not a folder (give a study's results folder)")
    if not 0 <= args.noise_floor < 100:
        raise InputError("--noise-floor must be within 0..100 (percent)")
    from servelab.results.layout import OPTIMIZE_FILE, SCALE_FILE

    if (args.folder / OPTIMIZE_FILE).is_file():  # a `servelab optimize` folder: its note, again
        from servelab.optimize.report import write_report as write_note

        html, md = write_note(args.folder)
        print(f"report:   {html}\nmarkdown: {md}")
        return 0

    if (args.folder / SCALE_FILE).is_file():  # a `servelab scale` folder: its own page
        from servelab.scale.report import write_scale_report

        print(f"report:   {write_scale_report(args.folder / SCALE_FILE)}")
        return 0
    html, md = write_report(args.folder, baseline=args.baseline, floor=args.noise_floor / 100,
                            allow_simulated=args.allow_simulated)
    print(f"report:   {html}\nmarkdown: {md}")
    return 0
