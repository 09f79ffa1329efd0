"""Why no step of the form overhead + bytes / bandwidth holds small models at concurrency 1.

One author posted vLLM runs of the Qwen3 family on an A100 (40 or 80 GB not stated), one request at
a time, in one issue (tenstorrent/tt-inference-server#340): Qwen3-0.6B and Qwen3-1.7B on 2025-06-24,
Qwen3-14B on 2025-07-18. The 1.7B rows are held out in the corpus, the 14B rows are fit rows. The
0.6B rows are not in the corpus: dated 2025-06-24 with a name before the 1.7B's, they would take that
group's position in the split and shift every later group by one (planner/corpus/rows.py).
This prints:
- each size's mean TPOT, measured and predicted with the committed constants;
- the read each size adds over the one below it, and the bandwidth that read would need to fit in
  the measured difference (mean TPOT over the three workloads every size ran), beside the
  A100-80GB's datasheet, the higher of the two A100s;
- the overhead + bytes / bandwidth line with the smallest worst relative error over those means,
  solved exactly (``planner.corpus.host_floor.best_additive``, where the series and its math live):
  fitted on these rows themselves, the best any constants of that form can do.

Usage: .venv/bin/python bench/host_floor.py
"""

from __future__ import annotations

from servelab.planner.corpus.host_floor import URL, best_additive, means, series
from servelab.planner.gpus import find_gpu


def main() -> int:
    sizes = series()
    print(f"Qwen3 on an A100, one request at a time ({URL}); predicted with the committed constants\n")
    print("| model | read per step | input -> output | measured TPOT | predicted | error |")
    print("|---|---|---|---|---|---|")
    for model, read, pairs in sizes:
        for row, predicted in pairs:
            measured = row.measured["mean_tpot_ms"]
            print(f"| {model} | {read / 1e9:.2f} GB | {row.workload.input_len} -> {row.workload.output_len} | "
                  f"{measured:.1f} ms | {predicted:.2f} ms | {predicted / measured - 1:+.1%} |")
    points = means(sizes)
    datasheet = find_gpu("A100-80GB").bandwidth_gbs / 1e3
    print()
    for (read0, ms0), (read1, ms1), (model, _, _) in zip(points, points[1:], sizes[1:]):
        print(f"{model}: {(read1 - read0) / 1e9:+.2f} GB read, {ms1 - ms0:+.2f} ms mean TPOT: "
              f"{(read1 - read0) / (ms1 - ms0) / 1e9:.2f} TB/s would be needed (A100-80GB datasheet: {datasheet:.2f})")
    worst, overhead, bandwidth = best_additive(points)
    print(f"\nbest overhead + bytes / bandwidth over the three means: {overhead:.2f} ms + "
          f"{bandwidth:,.0f} GB/s, worst error {worst:.1%} (fitted on these means themselves)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
