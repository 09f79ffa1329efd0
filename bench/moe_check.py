"""The MoE terms against what no corpus row holds: vLLM's kernel series and one run under load.

Prints, for each published fused-MoE kernel series (``speed_model.MOE_KERNEL_SERIES``), its own fit
(fixed time, share of the datasheet bandwidth) and the planner's kernel time at each batch with the
medians it uses beside the published one; then replays one published MoE serving run under load
through the simulated engine beside what it measured, three ways: this model (the experts a batch
picks); one token's routed experts at the family's fitted bandwidth plus 29.9 us a MoE layer (the
model of commit eb007b8, earlier on 2026-12-04); and one token's routed experts alone (the model
before that day).

That run, vLLM PR #23151 (2025-08-19: Qwen3-30B-A3B bf16 on one H100, random 2,048 -> 1,024
tokens, 10 at a time, 100 prompts, untuned fused-MoE configs), is not a corpus row: its date sorts
among committed groups, and adding it would move held-out rows across the split
(planner/corpus/rows.py).

Usage: .venv/bin/python bench/moe_check.py
"""

from __future__ import annotations

import dataclasses

from servelab.planner.corpus import replay as corpus_replay
from servelab.planner.corpus.rows import Source, SpeedRow, Workload
from servelab.planner.gpus import find_gpu
from servelab.planner.speed_model import MOE_KERNEL_SERIES, fitted_speed, moe_kernel, step_costs

EARLIER_FIXED_S = 29.9e-6  # eb007b8: the median fixed time of five one-token kernel runs
RUN = SpeedRow("vllm23151-qwen3-30b-a3b-h100-c10",
               Source("https://github.com/vllm-project/vllm/pull/23151", "2025-08-19", "not stated"),
               "Qwen/Qwen3-30B-A3B", "H100", Workload("random", 2048, 1024, 100, max_concurrency=10),
               {"mean_ttft_ms": 267.22, "mean_tpot_ms": 13.18, "output_tok_s": 739.79})


def kernel_table() -> list[str]:
    fixed, share = moe_kernel()
    lines = [f"planner: {fixed * 1e6:.1f} us a MoE layer, experts read at {share:.2f} of the datasheet (medians)", "",
             "| series | GPU | own fit: fixed, share | batch: published us / planner us (error) |", "|---|---|---|---|"]
    for series in MOE_KERNEL_SERIES:
        f, e = series.fit()
        bandwidth = find_gpu(series.gpu).bandwidth_gbs * 1e9
        cells = []
        for batch, measured in zip(series.batches, series.seconds):
            planned = fixed + series.read_bytes(batch) / (bandwidth * share)
            cells.append(f"{batch}: {measured * 1e6:.0f} / {planned * 1e6:.0f} ({planned / measured - 1:+.0%})")
        lines.append(f"| {series.what} | {series.gpu} | {f * 1e6:.1f} us, {e:.2f} | {'; '.join(cells)} |")
    return lines


def replayed(routed_only: bool, fixed_s: float) -> list:
    """The run through the simulated engine, optionally as an earlier model: one token's routed experts
    in the weight read (``routed_only``) and ``fixed_s`` a MoE layer added to each step."""
    engine, costs = corpus_replay.speed_engine, corpus_replay.step_costs
    if routed_only:
        corpus_replay.speed_engine = lambda row: dataclasses.replace(engine(row), expert_bytes=0.0)
        corpus_replay.step_costs = lambda e, c=None: dataclasses.replace(
            step_costs(e, c), overhead_s=step_costs(e, c).overhead_s + e.model.moe_layers * fixed_s)
    try:
        return corpus_replay.replay_speed(RUN, fitted_speed())
    finally:
        corpus_replay.speed_engine, corpus_replay.step_costs = engine, costs


def run_lines() -> list[str]:
    lines = ["", f"{RUN.id} ({RUN.source.url}): measured vs simulated", "",
             "| metric | measured | this model | routed + 29.9 us a layer (eb007b8) | routed only (before) |",
             "|---|---|---|---|---|"]
    for a, b, c in zip(replayed(False, 0.0), replayed(True, EARLIER_FIXED_S), replayed(True, 0.0)):
        cells = " | ".join(f"{x.predicted:,.2f} ({x.predicted / x.measured - 1:+.1%})" for x in (a, b, c))
        lines.append(f"| {a.metric} | {a.measured:,.2f} | {cells} |")
    return lines


def main() -> int:
    print("\n".join(kernel_table() + run_lines()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
