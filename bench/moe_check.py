"""The MoE terms against what no corpus row holds: vLLM's kernel series and one run under load.

Prints, for each published fused-MoE kernel series (``speed_model.MOE_KERNEL_SERIES``), its own fit
(fixed time, share of the datasheet bandwidth) and the planner's kernel time at each batch with the
medians it uses beside the published one; then replays one published MoE serving run under load
through the simulated engine, with the experts a batch picks and without them (the routed experts
of one token at the family's bandwidth, the model before 2026-12-04), beside what it measured.

That run, vLLM PR #23151 (2025-08-19: Qwen3-30B-A3B bf16 on one H100, random 2,048 -> 1,024
tokens, 10 at a time, 100 prompts, untuned fused-MoE configs), is not a corpus row: its date sorts
among committed groups, and adding it would move held-out rows across the split
(planner/corpus/__init__.py).

Usage: .venv/bin/python bench/moe_check.py
"""

from __future__ import annotations

import dataclasses

from servelab.planner import corpus_replay
from servelab.planner.corpus import Source, SpeedRow, Workload
from servelab.planner.gpus import find_gpu
from servelab.planner.speed_model import MOE_KERNEL_SERIES, fitted_speed, moe_kernel

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


def run_lines() -> list[str]:
    lines = ["", f"{RUN.id} ({RUN.source.url}): measured vs simulated", "",
             "| metric | measured | with the experts a batch picks | without |", "|---|---|---|---|"]
    constants = fitted_speed()
    with_experts = corpus_replay.replay_speed(RUN, constants)
    engine = corpus_replay.speed_engine
    corpus_replay.speed_engine = lambda row: dataclasses.replace(engine(row), expert_bytes=0.0)
    try:
        without = corpus_replay.replay_speed(RUN, constants)
    finally:
        corpus_replay.speed_engine = engine
    for a, b in zip(with_experts, without):
        lines.append(f"| {a.metric} | {a.measured:,.2f} | {a.predicted:,.2f} ({a.predicted / a.measured - 1:+.1%}) | "
                     f"{b.predicted:,.2f} ({b.predicted / b.measured - 1:+.1%}) |")
    return lines


def main() -> int:
    print("\n".join(kernel_table() + run_lines()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
