"""One plan: a model × accelerator × settings → weights, KV cache, concurrency, speed floor.

Pure: ``make_plan(PlanSpec)`` -> ``Plan``. The engine decides the KV rules
(see budget.py): "vllm" on a GPU, "vllm" on "cpu" (vLLM's CPU build), "llamacpp".
The prediction is shaped like the engine's own memory report
(``Plan.report()`` -> engines.memory.MemoryReport) so the two stand side by side.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from servelab.engines.memory import MemoryReport
from servelab.errors import InputError
from servelab.planner import budget
from servelab.planner.dtypes import (FP8_COMPUTE, GGUF_FLOATS, GGUF_QUANTIZED, KEEPS_EMBEDDINGS, kv_element_bytes,
                                     weight_bits)
from servelab.planner.gpus import Gpu
from servelab.planner.kv import KvPool, kv_bytes_per_token, kv_pool
from servelab.planner.models import ModelShape, tensor_parallel_sizes
from servelab.planner.speed import SpeedFloor, speed_floor
from servelab.planner.speed_model import Engine, StepCosts, expert_bytes, setup_class, step_costs
from servelab.planner.vllm_defaults import ASSUMED, batch_defaults, vllm_defaults

GIB = budget.GIB
DEFAULT_UTILIZATION = vllm_defaults(ASSUMED).gpu_memory_utilization  # a PlanSpec's, unless given


@dataclass(frozen=True, slots=True)
class PlanSpec:
    """What to plan. None = the engine's default (vLLM ``vllm_version``'s, llama.cpp's).

    weights_bytes: the checkpoint's real size when known (a local folder or GGUF), else
    computed from parameters × bits. cpu_kv_space_gib: VLLM_CPU_KVCACHE_SPACE.
    ctx_size/parallel: llama.cpp's --ctx-size (0 = the model's) and --parallel (slots).
    """

    model: ModelShape
    gpu: Gpu
    gpu_count: int = 1
    engine: str = "vllm"
    quantization: str | None = None
    kv_cache_dtype: str = "auto"
    max_model_len: int | None = None
    gpu_memory_utilization: float = DEFAULT_UTILIZATION  # the CLI gives vllm_version's own
    tensor_parallel: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enforce_eager: bool = False
    cpu_kv_space_gib: int = 1
    ctx_size: int = 0
    parallel: int = 1
    weights_bytes: int | None = None
    vllm_version: str = ASSUMED  # the vLLM release whose defaults the plan assumes (planner/vllm_defaults.py)


@dataclass(frozen=True, slots=True)
class Plan:
    spec: PlanSpec
    weights_bytes: int
    weights_per_gpu: int
    kv_bytes_per_token: Fraction
    kv_budget_bytes: int
    kv_tokens: int
    max_concurrency: float
    context_tokens: int
    replicas: int
    fits: bool
    speed: SpeedFloor
    pool: KvPool | None = None
    other: budget.OtherMemory | None = None
    slots: int | None = None
    costs: StepCosts | None = None  # the speed model (fitted where the GPU family has published runs)
    notes: tuple[str, ...] = field(default=())

    @property
    def requests_at_once(self) -> int:
        """Requests of ``context_tokens`` each that run at once, over all replicas:
        what the KV cache holds, capped by --max-num-seqs (vLLM) or the slots (llama.cpp)."""
        if not self.fits:
            return 0
        cap = self.slots if self.slots else default_batch(self.spec)[1]
        return min(int(self.max_concurrency), cap) * self.replicas

    def report(self) -> MemoryReport:
        """The prediction in the shape of the engine's memory report."""
        pool = self.pool
        return MemoryReport(
            weights_gib=round(self.weights_per_gpu / GIB, 6), kv_cache_gib=round(self.kv_budget_bytes / GIB, 6),
            kv_cache_tokens=self.kv_tokens, max_concurrency=round(self.max_concurrency, 2),
            max_concurrency_tokens=self.context_tokens, num_gpu_blocks=pool.num_blocks if pool else None,
            block_size=pool.block_size if pool else None, slots=self.slots,
            context_per_slot=self.context_tokens if self.slots else None)


def make_plan(spec: PlanSpec) -> Plan:
    _check(spec)
    if spec.engine == "llamacpp":
        return _llamacpp_plan(spec)
    return _vllm_plan(spec)


def _check(spec: PlanSpec) -> None:
    if spec.engine not in ("vllm", "llamacpp"):
        raise InputError(f"unknown engine {spec.engine!r}: plan knows vllm and llamacpp")
    if weight_bits(quantization(spec)) is None:
        raise InputError(f"unknown quantization {spec.quantization!r}: pass none, fp8, int8, awq, gptq "
                         "or a GGUF type (Q4_0, Q4_1, Q8_0, F16, Q4_K_M…)")
    if kv_element_bytes(spec.kv_cache_dtype, spec.model.dtype_bytes) is None:
        raise InputError(f"unknown KV cache dtype {spec.kv_cache_dtype!r}: pass auto, bf16, fp16, fp8, q8_0, q4_0")
    if spec.gpu.memory_gib is None:
        raise InputError(f"no memory size for {spec.gpu.name}: pass --gpu-memory-gib")
    tp = tensor_parallel(spec)
    if tp < 1 or spec.gpu_count % tp:
        raise InputError(f"--tensor-parallel-size {tp} must divide the GPU count {spec.gpu_count}")
    if spec.engine == "vllm" and tp not in tensor_parallel_sizes(spec.model):
        raise InputError(_tp_refused(spec, tp))
    if not 0 < spec.gpu_memory_utilization <= 1:
        raise InputError(f"--gpu-memory-utilization {spec.gpu_memory_utilization} must be in (0, 1]")


def _tp_refused(spec: PlanSpec, tp: int) -> str:
    """vLLM refuses a TP size that does not split the heads evenly (see ``tensor_parallel_sizes``)."""
    model, sizes = spec.model, tensor_parallel_sizes(spec.model)
    here = max(size for size in sizes if spec.gpu_count % size == 0)
    return (f"TP {tp} does not split the {model.heads} attention heads ({model.kv_heads} KV heads) of "
            f"{model.name} evenly, and vLLM refuses it: valid TP sizes {', '.join(map(str, sizes))} "
            f"(on {spec.gpu_count} GPUs: --tensor-parallel-size {here}, {spec.gpu_count // here} replicas)")


def quantization(spec: PlanSpec) -> str:
    return spec.quantization or spec.model.native_quantization


def tensor_parallel(spec: PlanSpec) -> int:
    return spec.tensor_parallel or spec.gpu_count


def speed_setup(spec: PlanSpec) -> str | None:
    """Which of ``speed_model.SETUPS`` (setups no fit row calibrates) the plan is, or None."""
    return setup_class(spec.model, tensor_parallel(spec), spec.enforce_eager)


def weights_bytes(model: ModelShape, quant: str) -> int:
    """Parameters × bits / 8; AWQ/GPTQ/fp8/int8 leave the embedding and LM head at 16 bits;
    GGUF files (Q4_1, Q8_0, F16 — GGUF's spelling) follow llama.cpp's layout (``gguf_weights_bytes``)."""
    bits = weight_bits(quant)
    if quant.lower() in KEEPS_EMBEDDINGS:
        kept = model.embedding_params
        return int((model.total_params - kept) * bits / 8) + kept * 2
    if quant.upper() in GGUF_QUANTIZED or quant in GGUF_FLOATS:
        return gguf_weights_bytes(model, quant.upper())
    return int(model.total_params * bits / 8)


def gguf_weights_bytes(model: ModelShape, quant: str) -> int:
    """llama.cpp's layout (llama-quant.cpp, convert_hf_to_gguf.py): norms stay F32; the output
    head (the embedding when tied) is stored as Q6_K, or Q8_0 when rows are not a multiple of
    256 values, never below the file's own type; the other tensors take the file's type.
    (K-quant mixes like Q4_K_M also raise a few attn_v/ffn_down tensors a step: not modelled.)"""
    norms = (2 * model.layers + 1) * model.hidden
    head = model.vocab * model.hidden
    head_bits = max(weight_bits("Q6_K" if model.hidden % 256 == 0 else "Q8_0"), weight_bits(quant))
    rest = model.total_params - norms - head
    return int(head * head_bits / 8) + norms * 4 + int(rest * weight_bits(quant) / 8)


def _speed(spec: PlanSpec, weights_per_gpu: int, tp: int) -> SpeedFloor:
    active_share = Fraction(spec.model.active, spec.model.total_params)
    read_bytes = int(weights_per_gpu * active_share)  # MoE: a decode step reads the routed experts only
    fp8 = quantization(spec).lower() in FP8_COMPUTE
    return speed_floor(read_bytes, spec.model.active / tp, spec.gpu, fp8)


def _costs(spec: PlanSpec, weights_per_gpu: int, tp: int, per_token: Fraction) -> StepCosts:
    """What real engines reach on this GPU family (planner/speed_model.py), or the roofline."""
    quant = quantization(spec).lower()
    read = float(weights_per_gpu * Fraction(spec.model.active, spec.model.total_params))
    # one expert's bytes follow the checkpoint's own size where it was read from the files
    scale = Fraction(weights_per_gpu * tp, weights_bytes(spec.model, quant)) if spec.model.experts else 1
    engine = Engine(spec.model, spec.gpu, read, float(per_token), tp, quantized=quant in ("awq", "gptq", "int4"),
                    fp8=quant in FP8_COMPUTE, max_num_batched_tokens=default_batch(spec)[0],
                    expert_bytes=float(expert_bytes(spec.model, weight_bits(quant), tp) * scale))
    return step_costs(engine)


def _weights(spec: PlanSpec) -> int:
    return spec.weights_bytes if spec.weights_bytes is not None else weights_bytes(spec.model, quantization(spec))


def _vllm_plan(spec: PlanSpec) -> Plan:
    tp, model = tensor_parallel(spec), spec.model
    on_cpu = spec.gpu.name == "cpu"
    weights = _weights(spec)
    per_gpu = weights // tp
    per_token = kv_bytes_per_token(model, kv_element_bytes(spec.kv_cache_dtype, model.dtype_bytes), tp)
    max_len = spec.max_model_len or model.max_position
    other = None if on_cpu else budget.estimate_other(
        model, *default_batch(spec), tp, spec.enforce_eager)
    total = int(spec.gpu.memory_gib * GIB)
    available = budget.vllm_cpu_budget(spec.cpu_kv_space_gib) if on_cpu else \
        budget.vllm_gpu_budget(total, spec.gpu_memory_utilization, per_gpu, other)
    pool = kv_pool(available, per_token, block_size(spec), max_len)
    fits = pool.max_concurrency >= 1 and (not on_cpu or weights + available <= total)
    return Plan(spec, weights, per_gpu, per_token, available, pool.tokens, pool.max_concurrency, max_len,
                spec.gpu_count // tp, fits, _speed(spec, per_gpu, tp), pool=pool, other=other,
                costs=_costs(spec, per_gpu, tp, per_token), notes=_notes(spec))


def _llamacpp_plan(spec: PlanSpec) -> Plan:
    model = spec.model
    weights = _weights(spec)
    per_token = kv_bytes_per_token(model, kv_element_bytes(spec.kv_cache_dtype, 2))
    cells = budget.llamacpp_cells(model, spec.ctx_size, spec.parallel)
    kv = budget.llamacpp_kv_bytes(cells, per_token)
    fits = weights + kv <= int(spec.gpu.memory_gib * GIB)
    return Plan(spec, weights, weights, per_token, kv, cells, float(spec.parallel), cells // spec.parallel,
                spec.gpu_count, fits, _speed(spec, weights, 1), slots=spec.parallel, notes=_notes(spec))


def block_size(spec: PlanSpec) -> int:
    if spec.gpu.name != "cpu":
        return budget.GPU_BLOCK_SIZE
    return budget.CPU_MLA_BLOCK_SIZE if spec.model.mla else budget.CPU_BLOCK_SIZE


def default_batch(spec: PlanSpec) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs): the server defaults of ``spec.vllm_version`` by
    device memory (``vllm_defaults.batch_defaults``), unless given."""
    tokens, seqs = batch_defaults(spec.gpu.name, spec.gpu.memory_gib, spec.vllm_version)
    return spec.max_num_batched_tokens or tokens, spec.max_num_seqs or seqs


def _notes(spec: PlanSpec) -> tuple[str, ...]:
    notes = []
    if spec.model.name.lower().startswith("google/gemma"):
        notes.append("sliding-window layers counted as full attention (vLLM's hybrid allocator gives more)")
    if spec.engine == "vllm" and spec.gpu.name != "cpu":
        notes.append("activations, CUDA graphs and non-torch memory are modelled (fitted on published startup "
                     "logs: docs/planner_accuracy.md); the rest is exact")
    return tuple(notes)
