"""``servelab study``: engines × workloads × repeats from one TOML file.

    servelab study check demo.toml     # validate, print the plan, start nothing
    servelab study run demo.toml       # run what is not done yet (rerun = resume)

A run ends with the comparison tables and the path of the HTML report.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    check = sub.add_parser("check", help="validate a study file and print its plan")
    check.add_argument("file", type=Path)
    run_p = sub.add_parser("run", help="run (or resume) a study")
    run_p.add_argument("file", type=Path)
    run_p.add_argument("--port", type=int, default=None, help="port for every engine (default: the study's)")
    run_p.add_argument("--results", type=Path, default=None, help="results root (default: the study's, 'results')")
    run_p.add_argument("--verbose", action="store_true", help="show each run's full console block")
    run_p.add_argument("--no-report", action="store_true", help="skip the comparison and the HTML report")
    run_p.add_argument("--baseline", default=None, help="baseline config of the comparison")


def run(args: argparse.Namespace) -> int:
    from servelab.study.file import load_study

    study = load_study(args.file)
    if args.action == "check":
        print(plan_text(study))
        return 0
    if args.results is not None:
        import dataclasses

        study = dataclasses.replace(study, results=args.results)
    resume = ["servelab", "study", "run", str(args.file)]
    resume += ["--results", str(args.results)] if args.results is not None else []
    resume += ["--port", str(args.port)] if args.port is not None else []
    return run_and_report(study, args.port, args.verbose, not args.no_report, args.baseline, resume)


def plan_text(study) -> str:
    from servelab.study import layout
    from servelab.study.runner import run_status

    starts = f" on each of {study.starts} engine starts" if study.starts > 1 else ""
    lines = [(f"study {study.name}: {len(study.runs())} runs, {study.repeats} repeats{starts}, "
              f"results in {layout.study_dir(study)}")]
    for key in study.runs():
        lines.append(f"  {key.engine:<20} {key.workload:<20} {key.repeat}  {run_status(study, key)}")
    return "\n".join(lines)


def run_and_report(study, port=None, verbose=False, report=True, baseline=None,
                   resume: list[str] | None = None) -> int:
    """Run the study (SIGTERM counts as Ctrl-C, so engines stop), then compare and report.
    ``resume`` is the command line that picks an interrupted study up again."""
    import shlex

    from servelab.engines import Terminated, sigterm_as_interrupt
    from servelab.study import layout
    from servelab.study.runner import run_study

    t0 = time.monotonic()
    with sigterm_as_interrupt():
        try:
            outcome = run_study(study, port=port, verbose=verbose)
        except KeyboardInterrupt as exc:
            what = "terminated" if isinstance(exc, Terminated) else "interrupted"
            again = shlex.join(resume or ["servelab", "study", "run", str(study.path)])
            print(f"servelab: {what}; engine stopped. Completed runs are kept: `{again}` resumes.",
                  file=sys.stderr)
            return 143 if isinstance(exc, Terminated) else 130
    if report and outcome.done:
        print(closing(layout.study_dir(study), baseline, time.monotonic() - t0))
    return outcome.exit_code


def closing(folder: Path, baseline: str | None, elapsed_s: float) -> str:
    """The comparison tables, then where the report is."""
    from servelab.cli.compare import comparison_text
    from servelab.reports.report import write_report

    # The study's own file put simulated and measured engines together: shown, each labelled.
    tables = comparison_text([folder], baseline, allow_simulated=True)
    html, md = write_report(folder, baseline=baseline, allow_simulated=True)
    return f"\n{tables}\n\nstudy done in {elapsed_s:.0f} s\n  report:   {html}\n  markdown: {md}"
