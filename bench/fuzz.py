"""Hostile input at volume: the properties of tests/fuzz (fuzz_cases.py) with 10,000
generated cases per parser instead of CI's 60, counting what became of each case.

Per parser it prints how many cases ran and how many were read ("ok"), refused with one
line naming the file (by error class), or (for streams) became a failed request with its
reason; and any case that broke the property (a traceback, a message on two lines or
not naming the file), shrunk by Hypothesis to its smallest form. Exit status 1 if any.

Usage: PYTHONPATH=src .venv/bin/python bench/fuzz.py [--cases 10000] [--only stream,results,study,datasets]
Random each run (not derandomized, no example database): a new run explores new cases.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fuzz"))

import fuzz_cases as fc  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402


def parsers(tokenizer) -> dict:
    """name -> (strategy, check(case, folder) -> outcome)."""
    return {
        "stream": (fc.streams(), lambda case, folder: fc.check_stream(*case)),
        "results": (fc.result_files(), lambda case, folder: fc.check_result_files(folder, *case)),
        "study": (fc.study_files(), lambda case, folder: fc.check_study_file(folder, case)),
        "datasets": (fc.dataset_files(), lambda case, folder: fc.check_dataset_file(folder, *case, tokenizer)),
    }


def run(name: str, strategy, check, cases: int) -> tuple[collections.Counter, str | None]:
    """Count each case's outcome; the shrunk failing case, if the property broke."""
    counts: collections.Counter = collections.Counter()

    @settings(max_examples=cases, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def prop(case):
        with tempfile.TemporaryDirectory() as folder:
            counts[check(case, Path(folder))] += 1

    try:
        prop()
    except Exception as exc:  # the property broke: report it (with Hypothesis's shrunk case), go on
        notes = "\n    ".join(getattr(exc, "__notes__", []))  # Hypothesis's falsifying example
        return counts, f"{type(exc).__name__}: {str(exc)[:2000]}\n    {notes[:4000]}"
    return counts, None


def main() -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=10_000)
    p.add_argument("--only", default="stream,results,study,datasets")
    args = p.parse_args()
    broke = 0
    for name, (strategy, check) in parsers(fc.ByteTokenizer()).items():
        if name not in args.only.split(","):
            continue
        began = time.monotonic()
        counts, failure = run(name, strategy, check, args.cases)
        total = sum(counts.values())
        shares = ", ".join(f"{k} {v}" for k, v in counts.most_common())
        print(f"{name:9s} {total:6d} cases in {time.monotonic() - began:6.1f} s: {shares}", flush=True)
        if failure:
            broke += 1
            print(f"  BROKE: {failure}", flush=True)
    return 1 if broke else 0


if __name__ == "__main__":
    sys.exit(main())
