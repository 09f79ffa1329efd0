"""Step times that real vLLM engines reach, not the hardware's peak: the planner's speed model.

One engine step, on each GPU of a tensor-parallel group:
    step = overhead + overlapped(weight bytes read / (bandwidth x bw_eff),
                                 2 x active params x tokens computed / (peak FLOP/s x compute_eff))
                    + KV bytes read / (bandwidth x bw_eff) + attention FLOPs / (peak x compute_eff)
  where overlapped(r, c) = (r^p + c^p)^(1/p): p = 1 adds them (the fitted model, FITTED_OVERLAP),
  p = 2.5 is what one H200's GEMMs measured (the roofline's; ``sim.model.OVERLAP``).
- overhead: the scheduler, the sampler, the API server's and detokenizer's share of each step —
  everything that does not scale with bytes or FLOPs (fitted; one value for all GPUs).
- bandwidth x bw_eff: the memory bandwidth decode kernels reach, per GPU family (fitted);
  a quantized checkpoint reads fewer weight bytes, and its dequantization cost is the family's
  ``dequant`` factor on that read (1.0 until a fit row shows otherwise).
- overlapped: the linear layers read their weights and compute in the same kernels, so at the
  kernel level the two times overlap: p = 2.5 fits one H200's GEMM stacks (bench/gpu_roofline.py),
  where adding them overstates 32 to 256 tokens by up to 1.4x. The fitted model still adds them:
  with p = 2.5 it predicted left-out groups of fit rows better and held-out rows worse, and the
  fitted efficiencies absorb the difference (a hopper compute_eff of 0.88 where the H200's GEMMs
  reach 0.68 of the datasheet).
- KV bytes read: attention reads every cached token of every running request once per step
  (context x KV bytes per token); prefill adds attention's own FLOPs (4 x layers x heads x
  head dim x query tokens x context) to the compute term.
- A prompt longer than max_num_batched_tokens is prefilled in chunks (chunked prefill), one
  step each, each paying the overhead and the weight read again.
- TTFT adds a per-request cost (the API server: tokenizing, queueing, the first SSE chunk).
- Each running request adds a per-sequence cost to every step (scheduling it, preparing its
  inputs, sampling, and turning its token into an output: detokenizing and streaming it), which
  is what makes a step of 1,000 decoding requests far longer than its FLOPs and bytes alone.
- A mixture of experts reads, in each MoE layer, the experts its step's tokens pick (one token k
  of them, a 128-token prefill nearly all: ``sim.model.distinct_experts``, uniform routing, an
  upper bound) at a share of the datasheet bandwidth, and pays the fused-MoE kernels' fixed cost
  (routing, aligning tokens to experts, the activation, the weighted sum): both read off vLLM's
  own kernel benchmarks (``MOE_KERNEL_SERIES``, ``moe_kernel``), not fitted (no fit row is an MoE
  the model represents). The roofline reads one token's k experts whatever the batch: a lower bound.
- Weight-only quantized kernels (AWQ, GPTQ, FP8 on a GPU without FP8 tensor cores: W8A16)
  read fewer bytes but dequantize inside the matmul: their compute time is the bf16 one times
  ``weight_only_compute`` (>= 1), which shows when a batch is large enough to be compute-bound.
The last two are fitted on the corpus's runs under load (``corpus.fit.fit_load``).
A GPU family with no fitted efficiency uses the peak (bw_eff = compute_eff = 1): that is the
roofline, a lower bound of latency and an upper bound of throughput, and it is labelled so.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import asdict, dataclass, field
from functools import lru_cache

from servelab.planner.gpus import Gpu, find_gpu
from servelab.planner.models import ModelShape
from servelab.planner.nonkv import FITTED
from servelab.sim.model import MOE_FIELDS, OVERLAP, distinct_experts, experts_s, fields_of, overlapped

# The overlap exponent of the fitted model: 1, the weight read and the compute added. The H200's
# measured 2.5 (``sim.model.OVERLAP``) improved leave-one-group-out on the fit rows but made the
# held-out rows worse (docs/planner.md, "Grounded on one H200"), so the fitted model keeps adding
# them; the roofline, which no run calibrates, uses the measured overlap.
FITTED_OVERLAP = 1.0
# GPU name -> family: efficiency is a property of a generation's kernels and its memory system
# (HBM and GDDR parts of one generation are separate families; a family no run calibrates is
# planned at the roofline).
FAMILIES = {"A10": "ampere-gddr", "A40": "ampere-gddr", "A100-40GB": "ampere-hbm", "A100-80GB": "ampere-hbm",
            "RTX3090": "ampere-consumer", "RTX4090": "ada", "L4": "ada", "L40S": "ada",
            "H100": "hopper", "H200": "hopper", "H20": "hopper", "B200": "blackwell", "MI300X": "cdna3"}


# Setups no fit row calibrates (two the step model has no term for; an MoE, whose terms come from
# kernel benchmarks, not a fit): a speed number for one carries the band of the corpus rows that are
# one (planner/bands.py, "METRIC@moe"), with the direction they missed in, not the general band. In
# order: the first that applies names the setup.
MAX_CALIBRATED_TP = 2  # no collective-communication term: no fit row beyond TP 2 could calibrate one
SETUPS = {
    "@tp-over-2": "tensor parallel over 2: the step model has no term for the per-layer all-reduce",
    "@moe": "a mixture of experts: the fused-MoE kernels' fixed cost and read come from vLLM's kernel "
            "benchmarks (the fixed cost spreads 31 to 150 us a layer by shape), and a batch's experts are "
            "counted as if routed uniformly, an upper bound (vllm#23151, 10 at a time: TPOT +35%); no fit row "
            "is an MoE, and the band's rows (one request at a time) were seen when the terms were added",
    "@eager": "--enforce-eager: every kernel launched from Python, and no fit row ran without CUDA graphs",
}


def setup_class(model, tensor_parallel: int, enforce_eager: bool) -> str | None:
    """Which of ``SETUPS`` a setup is (``model``: a ``ModelShape``), or None: one the fit represents."""
    if tensor_parallel > MAX_CALIBRATED_TP:
        return "@tp-over-2"
    if model.experts:
        return "@moe"
    return "@eager" if enforce_eager else None


@dataclass(frozen=True, slots=True)
class MoeKernelSeries:
    """Published timings of vLLM's fused-MoE kernels over decode-sized batches
    (``benchmarks/kernels/benchmark_moe.py``'s "Kernel time", or a PR's own microbenchmark of the
    same kernels: the whole fused-experts call, both expert GEMMs, the token alignment, the
    activation and the sum; not the router GEMM). ``expert_bytes``: one expert's weights (gate, up,
    down) on one GPU, in the run's dtype."""

    url: str
    date: str
    gpu: str
    what: str
    experts: int
    active: int
    expert_bytes: int
    batches: tuple[int, ...]
    seconds: tuple[float, ...]

    def read_bytes(self, batch: int) -> float:
        return distinct_experts(self.experts, self.active, batch) * self.expert_bytes

    def fit(self) -> tuple[float, float]:
        """(fixed seconds, bandwidth as a share of the GPU's datasheet) of: kernel time = fixed +
        the distinct experts' bytes / (datasheet bandwidth x share), least squares on the relative
        error over the batches."""
        u = [1 / t for t in self.seconds]
        v = [self.read_bytes(b) / t for b, t in zip(self.batches, self.seconds)]
        uu, uv, vv = sum(a * a for a in u), sum(a * b for a, b in zip(u, v)), sum(b * b for b in v)
        det = uu * vv - uv * uv
        fixed, per_byte = (vv * sum(u) - uv * sum(v)) / det, (uu * sum(v) - uv * sum(u)) / det
        return fixed, 1 / (per_byte * find_gpu(self.gpu).bandwidth_gbs * 1e9)


def _expert(hidden: int, intermediate: int, bytes_per: int) -> int:
    return 3 * hidden * intermediate * bytes_per


_DECODE = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96)
# vLLM's fused-MoE kernels as published, each run's default or shipped config, batches 1 to 96 (a
# decode step's tokens). The form above fits the first three within 6 %; the last two's fixed time
# is 2-5x theirs (the shape's default tiles), so the planner takes the median of each constant.
MOE_KERNEL_SERIES = (
    MoeKernelSeries("https://github.com/vllm-project/vllm/pull/19049", "2025-06-03", "A100-40GB",
                    "Qwen3-30B-A3B bf16, E=128 N=768 top-8, default config (A100-PCIE-40GB)", 128, 8,
                    _expert(2048, 768, 2), _DECODE,
                    (109.21e-6, 159.81e-6, 268.89e-6, 403.13e-6, 611.19e-6, 730.19e-6, 808.53e-6, 885.97e-6,
                     917.45e-6, 943.14e-6)),
    MoeKernelSeries("https://github.com/vllm-project/vllm/pull/24700", "2025-09-11", "H100",
                    "Qwen3-30B-A3B fp8_w8a8, E=128 N=768 top-8, main", 128, 8, _expert(2048, 768, 1), _DECODE,
                    (44.54e-6, 59.94e-6, 90.46e-6, 129.77e-6, 185.40e-6, 215.99e-6, 238.37e-6, 257.83e-6,
                     262.73e-6, 270.98e-6)),
    MoeKernelSeries("https://github.com/vllm-project/vllm/pull/24700", "2025-09-11", "H100",
                    "Mixtral-8x7B bf16 TP 2, E=8 N=7168 top-2, shipped tuned config", 8, 2, _expert(4096, 7168, 2),
                    _DECODE, (144.03e-6, 229.28e-6, 351.10e-6, 434.98e-6, 471.49e-6, 478.27e-6, 487.35e-6,
                              487.85e-6, 483.14e-6, 494.42e-6)),
    MoeKernelSeries("https://github.com/vllm-project/vllm/pull/40542", "2026-04-21", "A100-80GB",
                    "Kimi-VL-A3B shape bf16, E=64 N=1408 top-6 hidden 2048, default config (A100-SXM4-80GB)",
                    64, 6, _expert(2048, 1408, 2), (1, 4, 16, 64), (183.5e-6, 266.2e-6, 542.6e-6, 698.1e-6)),
    MoeKernelSeries("https://github.com/vllm-project/vllm/pull/44818", "2026-06-08", "H200",
                    "Gemma 4 bf16, E=128 N=704 K=2816 top-8, default config (the PR's microbenchmark)", 128, 8,
                    _expert(2816, 704, 2), _DECODE,
                    (189.2e-6, 187.0e-6, 185.4e-6, 200.0e-6, 257.8e-6, 314.4e-6, 341.1e-6, 382.8e-6, 391.8e-6,
                     405.6e-6)),
)


@lru_cache(maxsize=1)
def moe_kernel() -> tuple[float, float]:
    """(fixed seconds per MoE layer and step, the experts' read as a share of the datasheet
    bandwidth): the medians of ``MOE_KERNEL_SERIES``' fits. Not fitted on the corpus."""
    fits = [series.fit() for series in MOE_KERNEL_SERIES]
    return statistics.median(f for f, _ in fits), statistics.median(e for _, e in fits)


def expert_bytes(model: ModelShape, bits: float, tensor_parallel: int) -> float:
    """One routed expert's weights in one MoE layer on one GPU (tensor parallel splits each expert)."""
    return _expert(model.hidden, model.moe_intermediate, 1) * bits / 8 / tensor_parallel if model.experts else 0.0


@dataclass(frozen=True, slots=True)
class Efficiency:
    bw_eff: float = 1.0
    compute_eff: float = 1.0
    dequant: float = 1.0


@dataclass(frozen=True, slots=True)
class SpeedConstants:
    overhead_s: float = 0.0
    request_s: float = 0.0
    families: dict[str, Efficiency] = field(default_factory=dict)
    source: str = "roofline (datasheet peaks, no overheads)"
    per_seq_s: float = 0.0
    weight_only_compute: float = 1.0
    overlap: float = FITTED_OVERLAP

    def efficiency(self, gpu: Gpu) -> Efficiency | None:
        return self.families.get(FAMILIES.get(gpu.name, ""))

    def to_dict(self) -> dict:
        return {**asdict(self), "families": {k: asdict(v) for k, v in self.families.items()}}


@lru_cache(maxsize=1)
def fitted_speed() -> SpeedConstants:
    """The constants fitted on the corpus (data/fitted.json), else the roofline."""
    try:
        data = json.loads(FITTED.read_text(encoding="utf-8")).get("speed")
    except (OSError, ValueError):
        data = None
    if not data:
        return SpeedConstants()
    families = {name: Efficiency(**eff) for name, eff in data.get("families", {}).items()}
    return SpeedConstants(data["overhead_s"], data["request_s"], families, data["source"],
                          data.get("per_seq_s", 0.0), data.get("weight_only_compute", 1.0),
                          data.get("overlap", FITTED_OVERLAP))


@dataclass(frozen=True, slots=True)
class Engine:
    """What the speed of one serving setup depends on, per GPU of its tensor-parallel group."""

    model: ModelShape
    gpu: Gpu
    weight_bytes: float          # read per decode step (MoE: with the routed experts of one token)
    kv_bytes_per_token: float
    tensor_parallel: int = 1
    quantized: bool = False
    fp8: bool = False
    max_num_batched_tokens: int = 2048
    expert_bytes: float = 0.0    # MoE: one routed expert in one layer (``expert_bytes``); 0 = dense


@dataclass(frozen=True, slots=True)
class StepCosts:
    """The step model with this setup's numbers: seconds per step, per weight read, per computed
    token, per cached token read, per request; ``calibrated`` False = the roofline."""

    overhead_s: float
    per_token_s: float
    per_kv_token_s: float
    request_s: float
    attention_flop_s: float      # seconds per (query token x context token) of attention
    calibrated: bool
    source: str
    per_seq_s: float = 0.0
    read_s: float = 0.0
    overlap: float = OVERLAP
    expert_read_s: float = 0.0   # one routed expert in every MoE layer (``sim.model.StepModel``)
    expert_token_s: float = 0.0  # the routed experts' compute per token
    experts: int = 0
    active_experts: int = 0

    def to_dict(self) -> dict:
        return fields_of(self)

    def step_s(self, tokens: int, context: int, attention_pairs: float = 0.0, seqs: int = 1) -> float:
        return (self.overhead_s + self.per_seq_s * seqs + overlapped(self.read_s, self.per_token_s * tokens, self.overlap)
                + experts_s(self, tokens) + self.per_kv_token_s * context + self.attention_flop_s * attention_pairs)


def step_costs(engine: Engine, constants: SpeedConstants | None = None) -> StepCosts:
    c = constants or fitted_speed()
    eff = c.efficiency(engine.gpu)
    calibrated = eff is not None
    eff = eff or Efficiency()
    bandwidth = engine.gpu.bandwidth_gbs * 1e9 * eff.bw_eff
    flops = engine.gpu.tflops(engine.fp8) * 1e12 * eff.compute_eff
    dequant = eff.dequant if engine.quantized else 1.0
    model = engine.model
    # an MoE where the family is calibrated: the experts a step picks at the kernels' own share; the
    # roofline keeps one token's routed experts in the weight read, a lower bound at any batch
    moe_layers = model.moe_layers if engine.expert_bytes and calibrated else 0
    routed = min(engine.weight_bytes, model.active_experts * moe_layers * engine.expert_bytes)
    read_s = (engine.weight_bytes - routed) / bandwidth * dequant
    moe_fixed_s, moe_share = moe_kernel() if moe_layers else (0.0, 1.0)
    expert_read_s = moe_layers * engine.expert_bytes / (engine.gpu.bandwidth_gbs * 1e9 * moe_share) * dequant
    per_token = 2 * engine.model.active / engine.tensor_parallel / flops if flops > 0 else 0.0
    if calibrated and weight_only(engine):
        per_token *= c.weight_only_compute
    # the routed experts' share of a token's FLOPs runs in the fused-MoE kernels, beside their read
    expert_share = model.active_experts * moe_layers * _expert(model.hidden, model.moe_intermediate, 1) / model.active
    expert_token_s = per_token * min(1.0, expert_share)
    per_token -= expert_token_s
    heads = max(1, engine.model.heads // engine.tensor_parallel)
    attention = 4 * engine.model.layers * heads * engine.model.head_dim / flops if flops > 0 else 0.0
    source = c.source if calibrated else SpeedConstants().source
    overhead = c.overhead_s + moe_layers * moe_fixed_s if calibrated else 0.0
    return StepCosts(overhead, per_token,
                     engine.kv_bytes_per_token / bandwidth, c.request_s if calibrated else 0.0,
                     attention, calibrated, source, c.per_seq_s if calibrated else 0.0, read_s,
                     c.overlap if calibrated else OVERLAP, expert_read_s, expert_token_s,
                     model.experts if moe_layers else 0, model.active_experts if moe_layers else 0)


def weight_only(engine: Engine) -> bool:
    """Weights stored in fewer bits than the matmul computes in: AWQ/GPTQ, and FP8 where the GPU
    has no FP8 tensor cores (vLLM then runs FP8 checkpoints weight-only, Marlin W8A16)."""
    return engine.quantized or (engine.fp8 and not engine.gpu.fp8_tflops)


def ttft_s(costs: StepCosts, engine: Engine, prompt: int) -> float:
    """One request alone: the API's per-request cost and the prompt's prefill chunks (the first
    token is sampled at the end of the last chunk)."""
    chunk = max(1, engine.max_num_batched_tokens)
    total, done = costs.request_s, 0
    for _ in range(math.ceil(prompt / chunk)):
        tokens = min(chunk, prompt - done)
        total += costs.step_s(tokens, done + tokens, tokens * (done + tokens / 2))
        done += tokens
    return total


def tpot_s(costs: StepCosts, prompt: int, output: int, batch: int = 1) -> float:
    """Mean time per output token of ``batch`` requests decoding together, each at the mean context
    of its decode (prompt + half the output)."""
    context = batch * (prompt + output / 2)
    return costs.step_s(batch, int(context), context, batch)


def concurrency1(costs: StepCosts, engine: Engine, prompt: int, output: int) -> dict[str, float]:
    """Mean TTFT and TPOT (ms) and output tok/s of requests sent one after another."""
    ttft, tpot = ttft_s(costs, engine, prompt), tpot_s(costs, prompt, output)
    latency = ttft + (output - 1) * tpot
    return {"mean_ttft_ms": ttft * 1e3, "mean_tpot_ms": tpot * 1e3, "output_tok_s": output / latency}


def sim_step_model(costs: StepCosts, label: str) -> dict:
    """The same step model as the simulated engine's (``sim.model.StepModel``, as its JSON file):
    the weight read overlaps the token compute the same way; the per-request cost holds each
    request back before the engine sees it."""
    from servelab.planner.bands import band_note

    if costs.calibrated:
        what = f"fitted on published vLLM runs; expected TPOT error{band_note('mean_tpot_ms') or ' unknown'}"
    else:
        what = "roofline: a lower bound of latency, an upper bound of throughput; no published run calibrates this GPU"
    source = f"planner speed model, {label} ({what})"
    return {"overhead_s": costs.overhead_s, "per_seq_s": costs.per_seq_s, "per_token_s": costs.per_token_s,
            "per_kv_token_s": costs.per_kv_token_s, "per_attention_s": costs.attention_flop_s, "floor_s": 0.0,
            "request_s": costs.request_s, "read_s": costs.read_s, "overlap": costs.overlap,
            **({name: getattr(costs, name) for name in MOE_FIELDS} if costs.experts else {}),
            "source": source}
