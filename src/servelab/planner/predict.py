"""The plan for an engine as launched, and how it compares with what the engine reported.

``plan_for_engine(engine)`` reads the engine's model files (planner.files), its flags
and its environment, and the device it runs on; None when servelab cannot know them
(an external or command engine, a hub id not in the local cache). ``compare`` puts a
prediction beside a measured ``MemoryReport``, field by field, with the error.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from servelab.engines.memory import MemoryReport
from servelab.engines.spec import flag_value
from servelab.engines.vllm import served_dtype, vllm_build
from servelab.errors import InputError
from servelab.planner.files import load_model
from servelab.planner.gpus import GPUS, Gpu, find_gpu
from servelab.planner.plan import DEFAULT_UTILIZATION, Plan, PlanSpec, make_plan
from servelab.telemetry.gpu import gpu_devices

GIB = 2**30
COMPARED = ("weights_gib", "kv_cache_gib", "kv_cache_tokens", "max_concurrency", "num_gpu_blocks", "slots",
            "context_per_slot")


def plan_for_engine(engine) -> Plan | None:
    """The planner's prediction for a started (or about to start) ``engines.Engine``."""
    spec = engine.spec
    if spec.kind not in ("vllm", "llamacpp"):
        return None
    try:
        source = load_model(spec.model)
    except InputError:
        return None
    env = {**os.environ, **engine.kind.environment(spec), **spec.env}
    return make_plan(_plan_spec(spec, source, env))


def _plan_spec(spec, source, env: dict) -> PlanSpec:
    args = [str(a) for a in spec.args]
    common = dict(model=source.shape, quantization=source.quantization, weights_bytes=source.weights_bytes)
    if spec.kind == "llamacpp":
        return PlanSpec(**common, gpu=local_device(cpu=True), engine="llamacpp",
                        ctx_size=_int(args, "--ctx-size", "-c") or 0, parallel=_int(args, "--parallel", "-np") or 1)
    on_cpu = vllm_build() == "cpu"
    if on_cpu:  # the dtype the CPU build serves in (ours on AMX CPUs: float32) sets weight and KV bytes
        common = _served_in(common, served_dtype(args)[0])
    return PlanSpec(**common, gpu=local_device(cpu=on_cpu), max_model_len=_int(args, "--max-model-len"),
                    kv_cache_dtype=flag_value(args, "--kv-cache-dtype") or "auto",
                    gpu_memory_utilization=float(flag_value(args, "--gpu-memory-utilization")
                                                 or DEFAULT_UTILIZATION),
                    tensor_parallel=_int(args, "--tensor-parallel-size", "-tp"),
                    max_num_seqs=_int(args, "--max-num-seqs"), enforce_eager="--enforce-eager" in args,
                    cpu_kv_space_gib=int(env.get("VLLM_CPU_KVCACHE_SPACE") or 1))


# --dtype values (vLLM's names) -> bytes per weight; "auto" keeps the checkpoint's.
DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "half": 2, "float16": 2}


def _served_in(common: dict, dtype: str) -> dict:
    """The model as held in memory at ``dtype``: weights (and "auto" KV) scale from the checkpoint's bytes."""
    size = DTYPE_BYTES.get(dtype)
    shape = common["model"]
    if size is None or size == shape.dtype_bytes or common["quantization"]:
        return common
    weights = common["weights_bytes"]
    return {**common, "model": replace(shape, dtype_bytes=size),
            "weights_bytes": weights * size // shape.dtype_bytes if weights else None}


def _int(args: list[str], *flags: str) -> int | None:
    for flag in flags:
        value = flag_value(args, flag)
        if value is not None:
            return int(value)
    return None


def local_device(cpu: bool) -> Gpu:
    """This machine's CPU (its memory), or its first GPU through NVML matched to the table."""
    import psutil

    if cpu:
        return replace(GPUS["cpu"], memory_gib=psutil.virtual_memory().total / GIB)
    first = next(iter(gpu_devices()), None)
    if first is None or first["memory_total_gib"] is None:  # no GPU visible (or no NVML): plan for the host
        return replace(GPUS["cpu"], memory_gib=psutil.virtual_memory().total / GIB)
    total = first["memory_total_gib"]
    return replace(match_gpu(str(first["name"]), total), memory_gib=total)


def match_gpu(device_name: str, memory_gib: float) -> Gpu:
    """The table entry NVML's name describes ("NVIDIA L40S" is an L40S, not an L4; an A100's
    memory tells 40 GB from 80 GB); an unknown GPU keeps its name with no datasheet speeds."""
    def base(gpu: Gpu) -> str:
        return gpu.name.split("-")[0]

    found = [g for g in GPUS.values() if g.memory_gib and base(g) in device_name.upper().replace(" ", "")]
    if not found:
        return find_gpu(device_name) or Gpu(device_name, memory_gib, 1000, 0.0)
    return max(found, key=lambda g: (len(base(g)), -abs(g.memory_gib - memory_gib)))


@dataclass(frozen=True, slots=True)
class Comparison:
    field: str
    measured: float | None
    predicted: float | None

    @property
    def error(self) -> float | None:
        """(predicted − measured) / measured; None when either is missing or measured is 0."""
        if self.measured in (None, 0) or self.predicted is None:
            return None
        return (self.predicted - self.measured) / self.measured


def compare(measured: MemoryReport, predicted: MemoryReport) -> list[Comparison]:
    return [Comparison(name, getattr(measured, name), getattr(predicted, name)) for name in COMPARED
            if getattr(measured, name) is not None or getattr(predicted, name) is not None]


def prediction_facts(engine) -> dict | None:
    """What a result stores beside the engine's memory report: the prediction and its errors."""
    try:
        plan = plan_for_engine(engine)
    except InputError:
        return None
    if plan is None:
        return None
    predicted = plan.report()
    errors = {c.field: c.error for c in compare(engine.memory_report, predicted) if c.error is not None}
    return {"predicted": True, "memory_report": predicted.to_dict(), "errors": errors}


def prediction_line(facts: dict) -> str:
    """One progress line: the predicted KV tokens, concurrency and weights, each with its error."""
    report, errors = facts["memory_report"], facts["errors"]

    def err(name: str) -> str:
        return "" if name not in errors else " (exact)" if errors[name] == 0 else f" ({errors[name]:+.2%})"

    parts = [f"KV cache {report['kv_cache_tokens']:,} tokens{err('kv_cache_tokens')}"]
    if report.get("max_concurrency") is not None:
        parts.append(f"{report['max_concurrency']:.2f} requests of {report['max_concurrency_tokens']:,} tokens"
                     f"{err('max_concurrency')}")
    parts.append(f"weights {report['weights_gib']:.2f} GiB{err('weights_gib')}")
    return "predicted by servelab plan: " + " · ".join(parts)
