"""Do the costs fitted under load (``corpus.fit.fit_load``) carry to a (model, GPU) group the fit never saw?

Leave-one-group-out over the corpus's fit rows under load, held-out rows untouched: for each group,
``fit_load`` runs on the other groups (the group is added to the held-out set, so ``fit_rows`` refuses
it), and the group's rows are replayed with those constants and with none (the concurrency-1 fit
alone: no per-sequence cost, weight-only factor 1). Prints each group's median |log(predicted /
measured)| both ways, then over all left-out rows: the evidence for keeping the load terms that the
held-out rows are not asked for. Slow: one fit_load (its whole grid) per group, about 1.5 min each.

Usage: .venv/bin/python bench/plan_load_cv.py
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import replace

from servelab.planner.corpus.rows import load_corpus
from servelab.planner.corpus.replay import replay_speed
from servelab.planner.corpus.fit import fit_load, fit_speed, load_rows


def errors(rows, constants) -> list[float]:
    return [abs(math.log(c.predicted / c.measured)) for r in rows for c in replay_speed(r, constants)
            if not c.excluded]


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0]).parse_args(argv)
    corpus = load_corpus()
    rows = load_rows(corpus)
    pooled: dict[str, list[float]] = {"without": [], "with": []}
    for group in sorted({(r.model, r.gpu) for r in rows}):
        left_out = [r for r in rows if (r.model, r.gpu) == group]
        others = replace(corpus, held_out_ids=corpus.held_out_ids | {r.id for r in left_out})
        fitted = fit_load(others)
        bare = fit_speed(others)
        for name, constants in (("without", bare), ("with", fitted)):
            e = errors(left_out, constants)
            pooled[name] += e
            print(f"{group[0]} on {group[1]}: {name} load terms: median |log| {statistics.median(e):.3f} "
                  f"(per-sequence {constants.per_seq_s * 1e6:.0f} us, weight-only x{constants.weight_only_compute})",
                  flush=True)
    for name, e in pooled.items():
        print(f"all left-out rows, {name} load terms: median |log| {statistics.median(e):.3f}, "
              f"mean {statistics.mean(e):.3f} ({len(e)} figures)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
