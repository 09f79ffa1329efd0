"""Does overlapping the weight read with the token compute (``sim.model.overlapped``, the exponent
measured on one H200's GEMM stacks) predict (model, GPU) groups the fit never saw better than adding
them? Leave-one-group-out over the corpus's fit rows, held-out rows untouched.

For each fit group and each exponent (1 = the two times added, the model before the H200 measurement;
2.5 = measured): ``fit_speed`` on the other groups (the group joins the held-out set, so ``fit_rows``
refuses it) with the load costs fixed at the committed fit's (per-sequence cost, weight-only factor),
then the group's rows replayed. Prints each group's median |log(predicted / measured)| over TTFT, TPOT
and output tok/s, then over all left-out figures, at concurrency 1 and under load apart.

``--ceiling hopper=0.69`` caps a family's compute efficiency in every fit (``corpus.fit.MEASURED_CEILING``).

Usage: .venv/bin/python bench/plan_overlap_cv.py [--exponents 1,2.5] [--per-seq-us 150 --weight-only 1.5]
       [--ceiling hopper=0.69]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import replace

from servelab.planner.corpus.rows import fit_rows, load_corpus
from servelab.planner.corpus.replay import replay_speed
from servelab.planner.corpus.fit import ceiling_arg, fit_speed, outside_scope
from servelab.planner.speed_model import fitted_speed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exponents", default="1,2.5")
    parser.add_argument("--per-seq-us", type=float, default=None,
                        help="per-sequence cost per step (default: the committed fit's)")
    parser.add_argument("--weight-only", type=float, default=None,
                        help="weight-only compute factor (default: the committed fit's)")
    parser.add_argument("--ceiling", type=ceiling_arg, default={}, help="FAMILY=EFF: the most compute_eff may be")
    args = parser.parse_args(argv)
    exponents = [float(x) for x in args.exponents.split(",")]
    corpus = load_corpus()
    committed = fitted_speed()
    per_seq = committed.per_seq_s if args.per_seq_us is None else args.per_seq_us / 1e6
    weight_only = committed.weight_only_compute if args.weight_only is None else args.weight_only
    print(f"per-sequence cost {per_seq * 1e6:g} us, weight-only factor {weight_only:g}")
    rows = [r for r in fit_rows(corpus, [r for r in corpus.speed if not corpus.held_out(r)]) if not outside_scope(r)]
    pooled = {(p, load): [] for p in exponents for load in (False, True)}
    per_metric = {(p, m): [] for p in exponents for m in ("mean_ttft_ms", "mean_tpot_ms", "output_tok_s")}
    for group in sorted({(r.model, r.gpu) for r in rows}):
        left_out = [r for r in rows if (r.model, r.gpu) == group]
        others = replace(corpus, held_out_ids=corpus.held_out_ids | {r.id for r in left_out})
        line = []
        for p in exponents:
            constants = fit_speed(others, per_seq, weight_only, p, args.ceiling)
            errors = []
            for row in left_out:
                for c in replay_speed(row, constants):
                    if not c.excluded:
                        e = abs(math.log(c.predicted / c.measured))
                        errors.append(e)
                        pooled[(p, row.workload.under_load)].append(e)
                        per_metric[(p, c.metric)].append(e)
            line.append(f"exponent {p:g}: {statistics.median(errors):.3f}" if errors else f"exponent {p:g}: -")
        print(f"{group[0]} on {group[1]} ({len(left_out)} rows): " + ", ".join(line), flush=True)
    for p in exponents:
        for load in (False, True):
            e = pooled[(p, load)]
            if e:
                print(f"exponent {p:g}, {'under load' if load else 'concurrency 1'}: median |log| "
                      f"{statistics.median(e):.3f}, mean {statistics.mean(e):.3f} ({len(e)} figures)")
        print(f"exponent {p:g}, by metric: " + ", ".join(
            f"{m} {statistics.median(per_metric[(p, m)]):.3f}" for m in ("mean_ttft_ms", "mean_tpot_ms", "output_tok_s")
            if per_metric[(p, m)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
