"""Replay a corpus row through the planner: what it predicts for that start or that benchmark.

Each metric is compared only where the source printed it, and each isolates one part of the model:
- weights_gib: parameters x bits from the shape (planner/plan.py) against "Loading model weights took";
- other_gib: the non-KV model (planner/nonkv.py) against the log's non-torch + activation peak;
- kv_gib: the whole budget given the log's own weights (so a weights miss does not hide here);
- kv_tokens: the KV arithmetic (bytes per token, whole blocks) from the log's own KV GiB — or, on
  vLLM's CPU build, the whole plan, which is exact there.
Speed rows are replayed through the step model of planner/speed_model.py: at concurrency 1 in closed
form (mean TTFT, mean TPOT, output tok/s); at a higher concurrency or a request rate through the
simulated engine itself (sim/simulate.py: vLLM V1's scheduler, the same step model), which is what
``bench --simulate --model M --gpu G`` would print for that benchmark.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from servelab.planner import budget
from servelab.planner.corpus.rows import MemoryRow, SpeedRow
from servelab.planner.dtypes import kv_element_bytes, weight_bits
from servelab.planner.gpus import GPUS, find_gpu
from servelab.planner.kv import kv_bytes_per_token, kv_pool
from servelab.planner.models import ModelShape, find_model
from servelab.planner.nonkv import NonKvConstants, activation_bytes, non_torch_bytes, v0_profile_batch
from servelab.planner.plan import PlanSpec, default_batch, make_plan, weights_bytes
from servelab.planner.speed_model import (Engine, SpeedConstants, StepCosts, concurrency1, expert_bytes, sim_step_model,
                                          step_costs)
from servelab.sim.model import EngineLimits, SimRequest, StepModel
from servelab.sim.simulate import simulate

GIB = 2**30
# vLLM's --gpu-memory-utilization default for the versions the rows come from (0.90 up to
# 0.19.1; 0.92 from 0.20.0, the planner's own default: planner/vllm_defaults.py).
OLD_DEFAULT_UTILIZATION = 0.90


@dataclass(frozen=True, slots=True)
class Compared:
    row_id: str
    metric: str
    predicted: float
    measured: float
    excluded: str = ""  # why this figure is shown but neither fitted nor summarised

    @property
    def error(self) -> float:
        return (self.predicted - self.measured) / abs(self.measured)


def row_model(row) -> ModelShape:
    model = find_model(row.model)
    if model is None:
        raise KeyError(f"corpus row {row.id}: model {row.model} is not in the planner's table")
    bytes_ = getattr(row, "dtype_bytes", None)
    return replace(model, dtype_bytes=bytes_) if bytes_ else model


def replay_memory(row: MemoryRow, constants: NonKvConstants) -> list[Compared]:
    if row.era == "cpu":
        return _cpu(row)
    model, m = row_model(row), row.measured
    out = []
    quant = _quant(row)
    if "weights_gib" in m and quant is not None:
        predicted = weights_bytes(model, quant) / row.tensor_parallel / GIB
        out.append(Compared(row.id, "weights_gib", predicted, m["weights_gib"]))
    other = predict_other_gib(row, model, constants)
    if other is not None and {"non_torch_gib", "activation_gib"} <= m.keys():
        out.append(Compared(row.id, "other_gib", other, m["non_torch_gib"] + m["activation_gib"]))
    total = _total_gib(row)
    if other is not None and total and {"weights_gib", "kv_gib"} <= m.keys():
        requested = math.ceil(total * GIB * _utilization(row)) / GIB
        out.append(Compared(row.id, "kv_gib", requested - m["weights_gib"] - other, m["kv_gib"]))
    out += _kv_tokens(row, model)
    return out


def predict_other_gib(row: MemoryRow, model: ModelShape, constants: NonKvConstants) -> float | None:
    """The non-KV memory beside the weights the row's engine would take, by its era's rules."""
    if row.era == "v0":
        if row.max_model_len is None and model.max_position is None:
            return None
        tokens, seqs = v0_profile_batch(row.max_model_len or model.max_position, row.max_num_batched_tokens,
                                        row.max_num_seqs)
        act = activation_bytes(model, tokens, seqs, row.tensor_parallel, constants)
        return (act + non_torch_bytes(row.tensor_parallel, constants)) / GIB
    gpu = find_gpu(row.gpu)
    if gpu is None:
        return None
    spec = PlanSpec(model=model, gpu=gpu, max_num_seqs=row.max_num_seqs,
                    max_num_batched_tokens=row.max_num_batched_tokens)
    other = budget.estimate_other(model, *default_batch(spec), row.tensor_parallel, row.enforce_eager, constants)
    return other.total / GIB


def _kv_tokens(row: MemoryRow, model: ModelShape) -> list[Compared]:
    m = row.measured
    if "kv_gib" not in m or row.max_model_len is None and "kv_needed_gib" not in m:
        return []
    per_token = kv_bytes_per_token(model, kv_element_bytes(row.kv_cache_dtype, model.dtype_bytes),
                                   row.tensor_parallel)
    max_len = row.max_model_len or model.max_position
    pool = kv_pool(int(m["kv_gib"] * GIB), per_token, budget.GPU_BLOCK_SIZE, max_len)
    out = []
    if "kv_tokens" in m:
        out.append(Compared(row.id, "kv_tokens", pool.tokens, m["kv_tokens"]))
    elif "num_blocks" in m:
        out.append(Compared(row.id, "kv_tokens", pool.num_blocks * pool.block_size,
                            m["num_blocks"] * budget.GPU_BLOCK_SIZE))
    if "max_model_len_fit" in m:
        out.append(Compared(row.id, "kv_tokens", pool.num_blocks * pool.block_size, m["max_model_len_fit"]))
    if "kv_needed_gib" in m:
        out.append(Compared(row.id, "kv_needed_gib", float(per_token) * max_len / GIB, m["kv_needed_gib"]))
    return out


def _cpu(row: MemoryRow) -> list[Compared]:
    """vLLM's CPU build: the whole plan, which the KV pool makes exact (no profile run touches it)."""
    model = row_model(row)
    spec = PlanSpec(model=model, gpu=replace(GPUS["cpu"], memory_gib=64.0), max_model_len=row.max_model_len,
                    kv_cache_dtype=row.kv_cache_dtype, cpu_kv_space_gib=row.cpu_kv_space_gib or 1)
    plan = make_plan(spec)
    return [Compared(row.id, "kv_tokens", plan.kv_tokens, row.measured["kv_tokens"])]


def _quant(row: MemoryRow) -> str | None:
    """The planner's name for the row's weight format; None where the source does not say which."""
    if row.quantization is None:
        return "none"
    name = row.quantization.split()[0].lower()
    return name if name in ("fp8", "awq", "gptq", "int8") else None


def _total_gib(row: MemoryRow) -> float | None:
    """The GPU total the log printed, else the table's (what a user planning would have)."""
    if row.gpu_total_gib:
        return row.gpu_total_gib
    gpu = find_gpu(row.gpu)
    return gpu.memory_gib if gpu else None


def _utilization(row: MemoryRow) -> float:
    return row.gpu_memory_utilization or OLD_DEFAULT_UTILIZATION


def speed_engine(row: SpeedRow) -> Engine:
    """The planner's view of a benchmarked setup: per-GPU bytes read per step and KV bytes per token;
    the batch budget is vLLM 0.32's default for the GPU (the sources do not print theirs)."""
    model, gpu = row_model(row), find_gpu(row.gpu)
    if gpu is None:
        raise KeyError(f"corpus row {row.id}: GPU {row.gpu} is not in the planner's table")
    quant = (row.quantization or "none").lower()
    tp = row.tensor_parallel
    weights = weights_bytes(model, quant) / tp * model.active / model.total_params
    per_token = kv_bytes_per_token(model, kv_element_bytes("auto", model.dtype_bytes), tp)
    tokens, _ = default_batch(PlanSpec(model=model, gpu=gpu))
    return Engine(model, gpu, weights, float(per_token), tp, quantized=quant in ("awq", "gptq"),
                  fp8=quant == "fp8", max_num_batched_tokens=tokens,
                  expert_bytes=expert_bytes(model, weight_bits(quant), tp))


def replay_speed(row: SpeedRow, constants: SpeedConstants) -> list[Compared]:
    """TTFT, TPOT and output tok/s from the step model: in closed form at concurrency 1, else
    through the simulated engine (what ``bench --simulate`` runs)."""
    engine = speed_engine(row)
    prompt, output = row.workload.input_len, row.workload.output_len
    costs = step_costs(engine, constants)
    if not row.workload.under_load:
        predicted = concurrency1(costs, engine, prompt, output)
    else:
        predicted = simulated(row, engine, costs)
    measured = {"mean_ttft_ms": row.measured.get("mean_ttft_ms"), "mean_tpot_ms": row.measured.get("mean_tpot_ms"),
                "output_tok_s": row.output_tok_s}
    return [Compared(row.id, name, predicted[name], value, why_excluded(row, engine, name))
            for name, value in measured.items() if value]


def simulated(row: SpeedRow, engine: Engine, costs: StepCosts) -> dict[str, float]:
    """The row's benchmark run through the simulated engine with this step model, reported by
    ``bench``'s definitions: mean TTFT from send to first token (the API server's per-request cost
    included: it holds each request back before the engine sees it), mean TPOT (last - first) /
    (tokens - 1), output tokens over the run's duration. Every request is replayed (a burst's mean
    TTFT grows with its length). Lengths are fixed (the rows' random lengths are, with range ratio 0;
    ShareGPT rows replay their mean lengths); a finite request rate arrives evenly, as the mean of a
    Poisson process; prompts share no prefix; the KV cache is the planner's for the setup
    (``replay_kv_tokens``), so a burst that overflows it queues and preempts as it did there."""
    w = row.workload
    gap = 0 if not w.request_rate or math.isinf(w.request_rate) else round(1e9 / w.request_rate)
    requests = [SimRequest(i * gap, w.input_len, w.output_len) for i in range(w.num_prompts)]
    seqs = row.max_num_seqs or default_batch(PlanSpec(model=engine.model, gpu=engine.gpu))[1]
    limits = EngineLimits(max_num_seqs=seqs, max_num_batched_tokens=engine.max_num_batched_tokens,
                          num_blocks=replay_kv_tokens(row, engine) // budget.GPU_BLOCK_SIZE,
                          enable_prefix_caching=False)
    model = StepModel(**{**sim_step_model(costs, "corpus replay"), "source": "corpus replay"})
    result = simulate(requests, limits, model, w.max_concurrency)
    done = [e for e in result.emissions if e.token_ns and not e.error]
    ttft = [e.token_ns[0] - e.sent_ns for e in done]
    tpot = [(e.token_ns[-1] - e.token_ns[0]) / (len(e.token_ns) - 1) for e in done if len(e.token_ns) > 1]
    duration = max(e.token_ns[-1] for e in done)
    return {"mean_ttft_ms": sum(ttft) / len(ttft) / 1e6, "mean_tpot_ms": sum(tpot) / len(tpot) / 1e6,
            "output_tok_s": sum(len(e.token_ns) for e in done) / duration * 1e9}


def replay_kv_tokens(row: SpeedRow, engine: Engine) -> int:
    """The KV cache the planner gives this setup at the rows' era's default memory utilization
    (the sources print no startup log), and never less than one of the benchmark's requests: the
    engine served every one of them. (vLLM refuses to start without room for one request of
    --max-model-len tokens, but the sources do not always say which length they started with.)"""
    spec = PlanSpec(model=engine.model, gpu=engine.gpu, quantization=(row.quantization or "none").lower(),
                    gpu_memory_utilization=OLD_DEFAULT_UTILIZATION, tensor_parallel=row.tensor_parallel,
                    gpu_count=row.tensor_parallel, max_num_seqs=row.max_num_seqs, enforce_eager=row.enforce_eager)
    one = row.workload.input_len + row.workload.output_len
    block = budget.GPU_BLOCK_SIZE
    return max(make_plan(spec).kv_tokens, block * math.ceil(one / block))


def why_excluded(row: SpeedRow, engine: Engine, metric: str) -> str:
    """A TTFT below the roofline's (the prompt's FLOPs at the datasheet peak) cannot be a full prefill:
    the prompt was served from the prefix cache (repeated prompts), so it says nothing about prefill."""
    if metric != "mean_ttft_ms":
        return ""
    roofline = concurrency1(step_costs(engine, SpeedConstants()), engine, row.workload.input_len, 2)
    return "TTFT below the compute roofline (prefix-cache hits)" if row.measured[metric] < roofline[metric] else ""
