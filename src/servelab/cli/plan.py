"""``servelab plan``: does a model fit, how many requests at once, how fast at best — before launching.

    servelab plan --model Qwen/Qwen3-14B --gpu H100 --max-model-len 8192
    servelab plan --model ./my-model --gpu A10:2 --quantization awq --kv-cache-dtype fp8
    servelab plan --model SmolLM2-135M-Instruct --gpu cpu --max-model-len 2048   # the embedded engine
    servelab plan --engine llamacpp --model model.gguf --gpu cpu

Prints the rows of ``servelab serve``'s memory report, predicted, plus the speed floor
(the text: ``reports/plan_text.py``).
Top-level imports stay light so ``servelab --help`` is instant.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

GIB = 2**30


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct",
                        help="table name, local folder or config.json, .gguf file, or a hub id in the local "
                             "Hugging Face cache (default: the embedded %(default)s)")
    parser.add_argument("--gpu", default="cpu", metavar="NAME[:COUNT]",
                        help="accelerator from the table (see --list-gpus), or 'cpu' (default) for this machine")
    parser.add_argument("--engine", choices=("vllm", "llamacpp"), default="vllm")
    parser.add_argument("--quantization", help="none, fp8, int8, awq, gptq, or a GGUF type (Q4_0, Q4_1, Q8_0, F16…)")
    parser.add_argument("--kv-cache-dtype", default="auto", help="auto, bf16, fp16, fp8 (llama.cpp: f16, q8_0, q4_0)")
    parser.add_argument("--max-model-len", type=int, help="context length per request (default: the model's)")
    parser.add_argument("--vllm-version", default=None, metavar="X.Y",
                        help="the vLLM release whose defaults the plan assumes (default: the release servelab runs, "
                             "named in the plan's header); --gpu-memory-utilization is 0.92 from vLLM 0.20, 0.9 before")
    parser.add_argument("--gpu-memory-utilization", type=float, default=None,
                        help="vLLM's (default: --vllm-version's default)")
    parser.add_argument("--tensor-parallel-size", type=int, help="default: the GPU count")
    parser.add_argument("--max-num-seqs", type=int, help="vLLM's cap on running requests (default: vLLM's)")
    parser.add_argument("--max-num-batched-tokens", type=int, help="vLLM's token budget per step (default: vLLM's)")
    parser.add_argument("--enforce-eager", action="store_true", help="vLLM without CUDA graphs")
    parser.add_argument("--cpu-kv-space-gib", type=int, default=1, help="VLLM_CPU_KVCACHE_SPACE (default %(default)s)")
    parser.add_argument("--ctx-size", type=int, default=0, help="llama.cpp --ctx-size (default: the model's)")
    parser.add_argument("--parallel", type=int, default=1, help="llama.cpp --parallel, its slots (default 1)")
    parser.add_argument("--gpu-memory-gib", type=float, help="memory of a GPU not in the table (or override)")
    parser.add_argument("--gpu-bandwidth-gbs", type=float, help="memory bandwidth of a GPU not in the table")
    parser.add_argument("--gpu-tflops", type=float, help="dense bf16 peak of a GPU not in the table")
    parser.add_argument("--list-models", action="store_true", help="print the bundled model table and exit")
    parser.add_argument("--list-gpus", action="store_true", help="print the bundled GPU table and exit")
    parser.add_argument("--calibrate", nargs="+", metavar="RUN", type=Path,
                        help="fit the step-time model to these runs' telemetry (result folders, studies or "
                             ".timeline.jsonl files; the last run is held out to report the error) and, where they "
                             "have per-request records, the simulator by replaying them; without "
                             "--max-model-len the plan is for the context the runs served")
    parser.add_argument("--hold-out", nargs="+", metavar="RUN", type=Path, default=[],
                        help="with --calibrate: measured runs of the same engine NOT fitted, replayed through the "
                             "calibrated simulator with the error against their repeats' range")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    parser.add_argument("--sim-step-model", type=Path, metavar="FILE",
                        help="write the plan's step model (the calibrated one with --calibrate) for the simulated "
                             "engine, and print the flags that run it with this plan's KV cache and limits")


def run(args: argparse.Namespace) -> int:
    from servelab.planner import calibrate
    from servelab.planner.fit import require_fit
    from servelab.reports.plan_text import format_calibration, format_plan, format_replay, list_gpus, list_models

    if args.list_models or args.list_gpus:
        print(list_models() if args.list_models else list_gpus())
        return 0
    if args.hold_out and not args.calibrate:
        from servelab.errors import InputError

        raise InputError("--hold-out needs --calibrate: the runs to fit before replaying these")
    replayable = _has_records(args.calibrate) if args.calibrate else False
    runs = calibrate.load_runs(args.calibrate, required=not replayable) if args.calibrate else None
    plan = make(args, calibrate.runs_max_model_len(runs) if runs else None)
    require_fit(plan)
    fitted = calibrate.calibrate(runs, plan.speed.tpot_batch1_s) if _enough(runs, replayable) else None
    replayed = replay_fit(args, plan, fitted) if replayable else None
    if args.json:
        print(json.dumps({**plan_json(plan), "calibration": fitted.to_dict() if fitted else None,
                          "replay": replay_json(replayed) if replayed else None}, indent=1))
    else:
        text = format_plan(plan) + (format_calibration(fitted, plan, args.max_model_len) if fitted else "")
        print(text + (format_replay(replayed) if replayed else ""))
    if args.sim_step_model:
        print(write_sim_engine(plan, fitted, args.sim_step_model, args.model, replayed))
    return 0


def _has_records(paths: list[Path]) -> bool:
    """Whether any run given has per-request records: then it can be replayed."""
    return any(p.name.endswith(".records.jsonl") for path in paths
               for p in ([path.with_name(path.name.removesuffix(".json") + ".records.jsonl")] if path.is_file()
                         else path.rglob("*.records.jsonl")) if p.is_file())


def _enough(runs, replayable: bool) -> bool:
    """The telemetry fit runs when there is telemetry; beside a replay, only with 3+ loaded intervals."""
    if not runs:
        return False
    return not replayable or sum(len(r.intervals) for r in runs) >= 3


def replay_fit(args: argparse.Namespace, plan, fitted):
    """The simulator fitted by replaying the --calibrate runs, the --hold-out runs replayed
    with it; starting from the telemetry fit where there is one, else the plan's roofline."""
    from servelab.cli.sim_flags import model_config
    from servelab.planner.calibrate import calibrate_replay
    from servelab.planner.files import load_model
    from servelab.planner.replay import load_observed
    from servelab.planner.sim_engine import sim_engine

    engine = sim_engine(plan, model_config(load_model(args.model)), fitted.model if fitted else None)
    fit_runs = load_observed(args.calibrate, engine.limits, required=True)
    held = load_observed(args.hold_out, engine.limits) if args.hold_out else []
    return calibrate_replay(fit_runs, held, engine.model)


def write_sim_engine(plan, fitted, path: Path, model: str, replayed=None) -> str:
    """The plan's simulated engine written as JSON (``planner.sim_engine``): the roofline's step
    model, the telemetry-calibrated one, or the one fitted by replay, each with its error; and
    how to run the simulated engine on this plan."""
    from servelab.cli.sim_flags import bench_flags, model_config, server_flags, write_step_model
    from servelab.planner.files import load_model
    from servelab.planner.sim_engine import sim_engine
    from servelab.reports.plan_text import pct, worst_line

    error = None if fitted is None else f"fit error {pct(fitted.fit_error)} on the runs' busy time"
    if replayed is not None:
        error = worst_line(replayed).strip().removeprefix("note: ")
    engine = sim_engine(plan, model_config(load_model(model)), fitted.model if fitted else None, error,
                        replayed.model if replayed else None)
    write_step_model(engine, path)
    serve, bench = " ".join(server_flags(engine, path)), " ".join(bench_flags(engine, path))
    return (f"\nsimulated engine (SIMULATED numbers, from this plan): step model written to {path}\n"
            f"  servelab serve --engine sim -- {serve}\n"
            f"  servelab bench --simulate {bench}")


def replay_json(replayed) -> dict:
    from servelab.planner.replay import METRICS

    def point(p, used: str) -> dict:
        return {"point": p.point, "used_for": used, "runs": [r.name for r in p.runs], "batch": p.batch,
                "metrics": {key: {"measured": p.values(key), "simulated": replayed.predicted[p.point][key],
                                  "error_vs_range": replayed.error(p, key)} for key, _ in METRICS}}

    return {"step_model": replayed.model.to_dict(), "loss": replayed.loss,
            "points": [point(p, "fit") for p in replayed.fitted] + [point(p, "held_out") for p in replayed.held_out],
            "warnings": replayed.warnings()}


def make(args: argparse.Namespace, runs_max_model_len: int | None = None):
    """The plan for the flags; with --calibrate and no --max-model-len, for the runs' context."""
    from servelab.planner import PlanSpec, make_plan
    from servelab.planner.files import load_model

    from servelab.planner.vllm_defaults import ASSUMED, vllm_defaults

    source = load_model(args.model)
    gpu, count = resolve_gpu(args)
    assumed = vllm_defaults(args.vllm_version or ASSUMED)
    utilization = assumed.gpu_memory_utilization if args.gpu_memory_utilization is None else args.gpu_memory_utilization
    spec = PlanSpec(
        model=source.shape, gpu=gpu, gpu_count=count, engine=args.engine,
        quantization=args.quantization or source.quantization, kv_cache_dtype=args.kv_cache_dtype,
        max_model_len=args.max_model_len or runs_max_model_len, gpu_memory_utilization=utilization,
        vllm_version=assumed.version, tensor_parallel=args.tensor_parallel_size, max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens, enforce_eager=args.enforce_eager,
        cpu_kv_space_gib=args.cpu_kv_space_gib, ctx_size=args.ctx_size, parallel=args.parallel,
        weights_bytes=source.weights_bytes if not args.quantization else None)
    return make_plan(spec)


def resolve_gpu(args: argparse.Namespace):
    """(Gpu, count) from --gpu NAME[:COUNT] and the overrides; the machine's memory for 'cpu'."""
    import dataclasses

    from servelab.errors import InputError
    from servelab.planner import Gpu, find_gpu

    name, _, count = args.gpu.partition(":")
    if count and (not count.isdigit() or int(count) < 1):
        raise InputError(f"--gpu {args.gpu}: COUNT must be a positive whole number")
    gpu = find_gpu(name)
    if gpu is None:
        if args.gpu_memory_gib is None or args.gpu_bandwidth_gbs is None:
            raise InputError(f"unknown GPU {name!r}: pass --gpu-memory-gib and --gpu-bandwidth-gbs "
                             "(see --list-gpus for the table)")
        gpu = Gpu(name, args.gpu_memory_gib, args.gpu_bandwidth_gbs, args.gpu_tflops or 0.0)
    memory = args.gpu_memory_gib or gpu.memory_gib or (machine_memory_gib() if gpu.name == "cpu" else None)
    gpu = dataclasses.replace(gpu, memory_gib=memory, bandwidth_gbs=args.gpu_bandwidth_gbs or gpu.bandwidth_gbs)
    return gpu, int(count or 1)


def machine_memory_gib() -> float:
    import psutil

    return psutil.virtual_memory().total / GIB


def plan_json(plan) -> dict:
    from dataclasses import asdict

    from servelab.planner.plan import quantization

    spec = plan.spec
    return {"predicted": True, "model": spec.model.name, "gpu": spec.gpu.name, "gpu_count": spec.gpu_count,
            "engine": spec.engine, "quantization": quantization(spec), "kv_cache_dtype": spec.kv_cache_dtype,
            "vllm_version": spec.vllm_version if spec.engine == "vllm" else None,
            "gpu_memory_utilization": spec.gpu_memory_utilization if spec.engine == "vllm" else None,
            "memory_report": plan.report().to_dict(), "weights_bytes": plan.weights_bytes,
            "kv_bytes_per_token": float(plan.kv_bytes_per_token), "kv_budget_bytes": plan.kv_budget_bytes,
            "other_memory": asdict(plan.other) if plan.other else None, "speed_floor": asdict(plan.speed),
            "speed_model": plan.costs.to_dict() if plan.costs else None,
            "fits": plan.fits, "requests_at_once": plan.requests_at_once, "notes": list(plan.notes)}
