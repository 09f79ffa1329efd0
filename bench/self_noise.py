"""How far apart does the same engine config come out when started twice? The demo's
random workload on ``baseline`` and ``baseline-again`` (the same flags, a second
engine start), on the embedded engine, judged by the noise rule `compare` uses.

On a quiet machine the two should be *within noise* on every headline metric: the
rule's floor (10 % for throughputs, 20 % for latencies) was set from such runs. With
``--busy K``, K processes spin on the CPUs for the whole run (how a shared CI machine
looks); the figures then say how much a neighbour moves a result between two starts —
the reason the real-engine test in ``tests/cli/test_study.py`` does not assert this.

Usage: .venv/bin/python bench/self_noise.py [--busy 1] [--rounds 2] [--repeats 2]
Target: within noise on every headline metric in every round on a quiet machine
(about 2 minutes a round on 2 cores). Measured 2026-12-01 on 2 cores: quiet, 1 round,
0 beyond noise, the largest gap 0.17× its floor; one busy loop, 4 rounds: 3 metrics
beyond noise in 1 of the 4, mean TTFT of one start's runs anywhere in 233–862 ms, the
between-start ratio up to 2.22× (median TTFT), throughputs 0.93–0.99×.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import multiprocessing
import tempfile
from pathlib import Path

from servelab.reports.compare import build_tables
from servelab.reports.verdict import NOISE, NOISE_FLOOR, TAIL_FACTOR
from servelab.study import layout
from servelab.results.runs import load_runs
from servelab.study.demo import demo_study
from servelab.study.runner import run_study

HEADLINE = ("output_throughput", "total_token_throughput", "request_throughput", "mean_ttft_ms",
            "median_ttft_ms", "mean_tpot_ms", "mean_e2el_ms")


def spin() -> None:
    while True:
        pass


def one_round(out: Path, repeats: int) -> list[dict]:
    study = demo_study(out, repeats=repeats)
    study = dataclasses.replace(study, pairs=(("baseline", "random"), ("baseline-again", "random")))
    if run_study(study).exit_code != 0:
        raise SystemExit(f"the study failed: see {layout.study_dir(study)}")
    [table] = build_tables(load_runs([layout.study_dir(study)]), baseline="baseline")
    rows = []
    for row in table.rows:
        if row.metric.key in HEADLINE:
            base, again, cmp = row.cells["baseline"], row.cells["baseline-again"], row.versus["baseline-again"]
            rows.append({"metric": row.metric.label, "tail": row.metric.tail, "base": base.values,
                         "again": again.values, "ratio": cmp.ratio, "verdict": cmp.verdict})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--busy", type=int, default=0, help="processes spinning on the CPUs during the runs")
    ap.add_argument("--rounds", type=int, default=1, help="baseline + baseline-again pairs, each two engine starts")
    ap.add_argument("--repeats", type=int, default=2, help="runs on each engine start (the demo's 2)")
    args = ap.parse_args()
    spinners = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.busy)]
    for p in spinners:
        p.start()
    missed, worst = 0, 0.0
    try:
        for n in range(1, args.rounds + 1):
            out = Path(tempfile.mkdtemp(prefix="self-noise-")) / f"round{n}"
            print(f"round {n}/{args.rounds} ({args.busy} busy loop(s) beside it):")
            for r in one_round(out, args.repeats):
                floor = NOISE_FLOOR * (TAIL_FACTOR if r["tail"] else 1)
                gap = abs(math.log(r["ratio"]))
                worst = max(worst, gap / math.log(1 + floor))
                missed += r["verdict"] != NOISE
                print(f"  {r['metric']:<16} baseline {fmt(r['base'])}  again {fmt(r['again'])}  "
                      f"{r['ratio']:.3f}× (floor {floor:.0%})  {r['verdict']}")
    finally:
        for p in spinners:
            p.kill()
    print(f"self-comparison beyond noise on {missed} metric(s); the largest gap is {worst:.2f}× its floor")
    if args.busy:
        print("no target with --busy: these figures are what a neighbour does to two starts of one config")
    else:
        print("target (quiet machine): 0 beyond noise —", "MET" if missed == 0 else "MISSED")


def fmt(values: tuple[float, ...]) -> str:
    return "[" + ", ".join(f"{x:,.1f}" for x in values) + "]"


if __name__ == "__main__":
    main()
