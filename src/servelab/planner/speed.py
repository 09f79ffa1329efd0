"""The speed floor (a roofline) and the step-time model a simulator can consume.

A decode step reads every active weight once, whatever the batch, and does
2 FLOPs per active weight per token:
    TPOT at batch 1        = weight bytes per GPU ÷ memory bandwidth
    compute takes over at  B = peak FLOP/s × weight read time ÷ (2 × active params per GPU)
    prefill, per 1k tokens = 2 × active params × 1000 ÷ peak FLOP/s   (compute-bound)
These are floors: real kernels reach 70–90 % of peak bandwidth and 40–70 % of peak
FLOPs, and the KV reads of long contexts add to every step. ``StepModel`` carries
the costs a calibration fits to measured runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.planner.gpus import Gpu


@dataclass(frozen=True, slots=True)
class StepModel:
    """One engine step's time: overhead + per running sequence + per token computed + weight read.

    step_s(running, tokens) = overhead_s + per_seq_s × running + per_token_s × tokens + weight_read_s
    """

    overhead_s: float
    per_seq_s: float
    per_token_s: float
    weight_read_s: float

    def step_s(self, running: int, tokens: int) -> float:
        return self.overhead_s + self.per_seq_s * running + self.per_token_s * tokens + self.weight_read_s


@dataclass(frozen=True, slots=True)
class SpeedFloor:
    """None where the accelerator's peak FLOP/s is unknown (a GPU given by memory and bandwidth only)."""

    tpot_batch1_s: float
    compute_bound_batch: float | None
    prefill_per_1k_s: float | None
    step: StepModel


def speed_floor(weight_bytes_per_gpu: int, active_params_per_gpu: float, gpu: Gpu, fp8: bool) -> SpeedFloor:
    flops = gpu.tflops(fp8) * 1e12
    read_s = weight_bytes_per_gpu / (gpu.bandwidth_gbs * 1e9)
    per_token_s = 2 * active_params_per_gpu / flops if flops > 0 else None
    return SpeedFloor(
        tpot_batch1_s=read_s,
        compute_bound_batch=read_s / per_token_s if per_token_s else None,
        prefill_per_1k_s=1000 * per_token_s if per_token_s else None,
        step=StepModel(overhead_s=0.0, per_seq_s=0.0, per_token_s=per_token_s or 0.0, weight_read_s=read_s),
    )
