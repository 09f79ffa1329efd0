"""``servelab report STUDY_DIR``: one self-contained HTML page (and Markdown) for a study;
``servelab report A B …``: the same page for any mix of result files and folders,
servelab's or another tool's (results/foreign).

Memory budget bars, throughput bars, TTFT/ITL distributions, requests in flight
per run, the comparison tables, and a generated "Methodology and limits". A `servelab
scale` folder gets its own page again, a `servelab optimize` folder its note
(optimize.md and optimize.html, from optimize.json).
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", type=Path, nargs="+", metavar="PATH",
                   help="a study's results folder (results/<study>), or any mix of result files and folders, "
                        "servelab's or another tool's (GuideLLM, AIPerf, inference-perf, SGLang, vLLM, llm-d report)")
    p.add_argument("--output-dir", type=Path, default=None,
                   help="where report.html and report.md go (default: the folder, when one folder is given; "
                        "else the current directory)")
    p.add_argument("--baseline", default=None, help="config the others are compared to (default: the first)")
    p.add_argument("--noise-floor", type=float, default=10.0, metavar="PCT",
                   help="throughput differences smaller than this %%, latency differences smaller than twice it, "
                        "are within noise (default %(default)s)")
    p.add_argument("--allow-simulated", action="store_true",
                   help="report simulated runs beside measured ones (refused by default)")


def run(args: argparse.Namespace) -> int:
    from servelab.errors import InputError
    from servelab.reports.report import write_report

    for path in args.paths:
        if not path.exists():
            raise InputError(f"{path} does not exist (give a study's results folder, or result files)")
    if not 0 <= args.noise_floor < 100:
        raise InputError("--noise-floor must be within 0..100 (percent)")
    if len(args.paths) > 1 or not args.paths[0].is_dir():  # loose results, servelab's or others'
        html, md = write_report(args.output_dir or Path.cwd(), baseline=args.baseline,
                                floor=args.noise_floor / 100, allow_simulated=args.allow_simulated,
                                paths=args.paths)
        print(f"report:   {html}\nmarkdown: {md}")
        return 0
    folder = args.paths[0]
    from servelab.results.layout import OPTIMIZE_FILE, SCALE_FILE

    if (folder / OPTIMIZE_FILE).is_file():  # a `servelab optimize` folder: its note, again
        from servelab.optimize.report import write_report as write_note

        html, md = write_note(folder)
        print(f"report:   {html}\nmarkdown: {md}")
        return 0

    if (folder / SCALE_FILE).is_file():  # a `servelab scale` folder: its own page
        from servelab.scale.report import write_scale_report

        print(f"report:   {write_scale_report(folder / SCALE_FILE)}")
        return 0
    html, md = write_report(args.output_dir or folder, baseline=args.baseline, floor=args.noise_floor / 100,
                            allow_simulated=args.allow_simulated, paths=[folder])
    print(f"report:   {html}\nmarkdown: {md}")
    return 0
