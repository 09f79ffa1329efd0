"""The planner's side of the GPU roofline measurement (bench/gpu_roofline.py, bench/measured/):
which GEMMs a dense model's decode step runs, and what the planner's step model gives for them
alone, so a measurement can be read beside the model (tests/planner/test_gpu_grounding.py)."""

from __future__ import annotations


def linear_shapes(model) -> list[tuple[int, int]]:
    """(out, in) of each linear layer one decode step runs, in order: per layer QKV, O, gate+up
    (merged, as vLLM's MergedColumnParallelLinear), down; then the LM head."""
    q, kv = model.heads * model.head_dim, model.kv_heads * model.head_dim
    layer = [(q + 2 * kv, model.hidden), (model.hidden, q), (2 * model.intermediate, model.hidden),
             (model.hidden, model.intermediate)]
    return layer * model.layers + [(model.vocab, model.hidden)]


def planner_kernels_s(model, gpu, eff, tokens: int) -> float:
    """The planner's step for ``tokens`` tokens on the GEMM bytes and FLOPs alone: weights / (bandwidth x
    bw_eff) + 2 x weights x tokens / (peak x compute_eff) — its step model without the fixed, per-request
    and per-sequence costs and without the input embedding, which no GEMM reads."""
    params = sum(o * i for o, i in linear_shapes(model))
    bw_eff = eff.bw_eff if eff else 1.0
    compute_eff = eff.compute_eff if eff else 1.0
    return 2 * params / (gpu.bandwidth_gbs * 1e9 * bw_eff) + 2 * params * tokens / (gpu.bf16_tflops * 1e12 * compute_eff)
