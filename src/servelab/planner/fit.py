"""A plan that does not fit: why, in one line, and the changes that would make it fit.

"KV cache -61.73 GiB, 0.00x" is a number that cannot be, and "does not fit" alone leaves
the user guessing. Each way out changes the spec as given and is checked by planning it
again (``make_plan(...).fits``), not by a second formula:

* tensor parallel (vLLM on GPUs): the smallest TP above the current one that vLLM accepts
  for the model (``models.tensor_parallel_sizes``) and that fits, on that many GPUs;
* quantization: each weight format of ``OFFERED`` smaller than the current one that fits
  as it is, or else with the longest context its KV cache holds;
* context: the longest ``--max-model-len`` (vLLM: num_blocks × block size, since one
  request needs cdiv(max_model_len, block_size) blocks) or ``--ctx-size`` (llama.cpp: the
  cells the memory left after the weights holds) that gives one request.
"""

from __future__ import annotations

import math
from dataclasses import replace

from servelab.errors import InputError
from servelab.planner.dtypes import weight_bits
from servelab.planner.models import tensor_parallel_sizes
from servelab.planner.plan import GIB, Plan, PlanSpec, make_plan, quantization, tensor_parallel

# One weight format per size worth trying (vLLM: int8 weighs as fp8, gptq as awq).
OFFERED = {"vllm": ("fp8", "awq"), "llamacpp": ("Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M")}


def require_fit(plan: Plan) -> None:
    """Raise ``InputError`` with the one-line reason and the ways out when ``plan`` does not fit."""
    if not plan.fits:
        raise InputError(does_not_fit(plan))


def does_not_fit(plan: Plan) -> str:
    spec = plan.spec
    ways = ways_out(spec)
    tail = f"; would fit with {' or '.join(ways)}" if ways else \
        "; no larger TP, smaller quantization or shorter context makes it fit"
    where = spec.gpu.name if spec.gpu_count == 1 else f"{spec.gpu_count} x {spec.gpu.name}"
    return f"{spec.model.name} does not fit on {where}: {why(plan)}{tail}"


def why(plan: Plan) -> str:
    spec, weights = plan.spec, plan.weights_per_gpu / GIB
    total = spec.gpu.memory_gib
    if spec.engine == "llamacpp" or (spec.gpu.name == "cpu" and plan.weights_bytes + plan.kv_budget_bytes
                                     > total * GIB):
        return (f"weights {plan.weights_bytes / GIB:.2f} GiB + KV cache {plan.kv_budget_bytes / GIB:.2f} GiB "
                f"exceed the {total:.2f} GiB there")
    if plan.kv_budget_bytes <= 0:
        share = spec.gpu_memory_utilization
        usable = math.ceil(total * GIB * share) / GIB
        return (f"weights {weights:.2f} GiB per GPU + {plan.other.total / GIB:.2f} GiB other memory leave no room "
                f"for a KV cache in the {usable:.2f} GiB vLLM may use ({share:g} x {total:.2f} GiB)")
    return (f"its {plan.kv_budget_bytes / GIB:.2f} GiB KV cache holds {plan.kv_tokens:,} tokens, "
            f"not one request of {plan.context_tokens:,}")


def ways_out(spec: PlanSpec) -> list[str]:
    return [way for way in (_larger_tp(spec), *_quantized(spec), _shorter(spec)) if way]


def _larger_tp(spec: PlanSpec) -> str | None:
    if spec.engine != "vllm" or spec.gpu.name == "cpu":
        return None
    for size in (s for s in tensor_parallel_sizes(spec.model) if s > tensor_parallel(spec)):
        if make_plan(replace(spec, gpu_count=size, tensor_parallel=spec.tensor_parallel and size)).fits:
            tp_flag = f" --tensor-parallel-size {size}" if spec.tensor_parallel else ""
            return f"--gpu {spec.gpu.name}:{size}{tp_flag} (TP {size})"
    return None


def _quantized(spec: PlanSpec) -> list[str]:
    """Each smaller weight format that fits, with a shorter context where it must."""
    out = []
    for name in OFFERED[spec.engine]:
        if weight_bits(name) >= weight_bits(quantization(spec)):
            continue
        smaller = replace(spec, quantization=name, weights_bytes=None)
        if make_plan(smaller).fits:
            out.append(f"--quantization {name}")
        elif shorter := _shorter(smaller):
            out.append(f"--quantization {name} {shorter}")
    return out


def _shorter(spec: PlanSpec) -> str | None:
    """The longest context that gives one request, as its flag; None when none does."""
    plan = make_plan(spec)
    if spec.engine == "llamacpp":
        free = int(spec.gpu.memory_gib * GIB) - plan.weights_bytes
        tokens = int(free // plan.kv_bytes_per_token) // spec.parallel * spec.parallel
        flag, field = "--ctx-size", "ctx_size"
    else:
        tokens = plan.pool.num_blocks * plan.pool.block_size
        flag, field = "--max-model-len", "max_model_len"
    if tokens <= 0 or not make_plan(replace(spec, **{field: tokens})).fits:
        return None
    return f"{flag} {tokens}"
