"""``servelab plan``: does a model fit, how many requests at once, how fast at best — before launching.

    servelab plan --model Qwen/Qwen3-14B --gpu H100 --max-model-len 8192
    servelab plan --model ./my-model --gpu A10:2 --quantization awq --kv-cache-dtype fp8
    servelab plan --model SmolLM2-135M-Instruct --gpu cpu --max-model-len 2048   # the embedded engine
    servelab plan --engine llamacpp --model model.gguf --gpu cpu

Prints the rows of ``servelab serve``'s memory report, predicted, plus the speed floor.
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

    error = None if fitted is None else f"fit error {_pct(fitted.fit_error)} on the runs' busy time"
    if replayed is not None:
        error = worst_line(replayed).strip().removeprefix("note: ")
    engine = sim_engine(plan, model_config(load_model(model)), fitted.model if fitted else None, error,
                        replayed.model if replayed else None)
    write_step_model(engine, path)
    serve, bench = " ".join(server_flags(engine, path)), " ".join(bench_flags(engine, path))
    return (f"\nsimulated engine (SIMULATED numbers, from this plan): step model written to {path}\n"
            f"  servelab serve --engine sim -- {serve}\n"
            f"  servelab bench --simulate {bench}")


def format_calibration(fitted, plan, asked_max_model_len: int | None) -> str:
    from servelab.reports.rows import aligned

    m = fitted.model
    held = "-" if fitted.held_out_error is None else f"{_pct(fitted.held_out_error)} on {fitted.held_out}"
    rows = [("step model", f"{m.overhead_s * 1e3:.2f} ms + {m.per_seq_s * 1e3:.3f} ms per sequence + "
                           f"{m.per_token_s * 1e3:.3f} ms per token + weight read {m.weight_read_s * 1e3:.2f} ms"),
            ("fit error", f"{_pct(fitted.fit_error)} over {fitted.intervals} loaded intervals, "
                          f"{len(fitted.runs)} run(s)"),
            ("held-out error", held)]
    rows += [(f"TPOT at batch {t.batch}", f"{t.seconds * 1e3:.2f} ms ({t.how})") for t in fitted.tpot]
    notes = [fitted.note()]
    if m.overhead_s < 0:  # the fitted per-step time is below the roofline's weight read
        notes.append("the per-step time fitted is below weights ÷ bandwidth: the bandwidth figure "
                     "is too low for this machine (pass --gpu-bandwidth-gbs)")
    if asked_max_model_len is None and plan.spec.max_model_len is not None:
        notes.append(f"the plan above is for the runs' max-model-len, {plan.spec.max_model_len:,} "
                     "(pass --max-model-len for another)")
    return ("\n\ncalibrated step time (from measured runs)\n" + aligned(rows)
            + "".join(f"\nnote: {note}" for note in notes if note))


def format_replay(replayed) -> str:
    """The replay calibration: its step model, and each point measured (its repeats' range) beside
    its replay, with the error against that range; held-out points last, extrapolations noted."""
    from servelab.planner.replay import METRICS

    m = replayed.model
    head = (f"\n\ncalibrated simulator (measured runs replayed; SIMULATED predictions, error against the "
            f"repeats' range)\n  step model  {m.overhead_s * 1e3:.2f} ms + {m.per_seq_s * 1e3:.3f} ms per sequence + "
            f"{m.per_token_s * 1e3:.4f} ms per token\n\n")
    rows = ["| point | runs | used for | " + " | ".join(f"{label}: measured (range) / simulated / error"
                                                      for _, label in METRICS) + " |",
            "|---|---|---|" + "---|" * len(METRICS)]
    for used, group in (("fit", replayed.fitted), ("**held out**", replayed.held_out)):
        for p in group:
            cells = [_replay_cell(replayed, p, key) for key, _ in METRICS]
            rows.append(f"| {p.point} | {len(p.runs)} | {used} | " + " | ".join(cells) + " |")
    notes = [f"\nnote: {line}" for line in replayed.warnings()]
    return head + "\n".join(rows) + worst_line(replayed) + "".join(notes)


def _replay_cell(replayed, point, key: str) -> str:
    values = point.values(key)
    spread = f"{min(values):.1f}–{max(values):.1f}" if len(values) > 1 else "one run"
    return (f"{point.mean(key):.1f} ({spread}) / {replayed.predicted[point.point][key]:.1f} / "
            f"{_pct(replayed.error(point, key))}")


def worst_line(replayed) -> str:
    """The held-out points' worst error per metric (against their range), in one line."""
    from servelab.planner.replay import METRICS

    if not replayed.held_out:
        return "\nnote: no --hold-out runs: the errors above are on the runs fitted"
    worst = [f"{label} {_pct(max((replayed.error(p, key) for p in replayed.held_out), key=abs))}"
             for key, label in METRICS]
    return "\nheld out, worst error against the repeats' range: " + ", ".join(worst)


def replay_json(replayed) -> dict:
    from servelab.planner.replay import METRICS

    def point(p, used: str) -> dict:
        return {"point": p.point, "used_for": used, "runs": [r.name for r in p.runs], "batch": p.batch,
                "metrics": {key: {"measured": p.values(key), "simulated": replayed.predicted[p.point][key],
                                  "error_vs_range": replayed.error(p, key)} for key, _ in METRICS}}

    return {"step_model": replayed.model.to_dict(), "loss": replayed.loss,
            "points": [point(p, "fit") for p in replayed.fitted] + [point(p, "held_out") for p in replayed.held_out],
            "warnings": replayed.warnings()}


def _pct(fraction: float) -> str:
    return f"{round(fraction, 3) + 0.0:+.1%}"  # + 0.0: a float error of -1e-16 prints +0.0%, not -0.0%


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


def format_plan(plan) -> str:
    from servelab.planner.plan import speed_setup
    from servelab.planner.speed_model import SETUPS
    from servelab.reports.rows import aligned, memory_rows

    rows = [row for row in memory_rows(plan.report()) if row[0] != "load time"]
    rows += [("KV per token", _bytes(plan.kv_bytes_per_token)), ("other memory", _other(plan))]
    rows = [(label, value + memory_band(plan, label)) for label, value in rows] + budget_row(plan)
    setup = speed_setup(plan.spec)
    expected, floor = expected_rows(plan, setup), speed_rows(plan.speed)
    width = max(len(label) for label, _ in rows + floor + expected)
    lines = [f"plan: {describe(plan)}", *assumes(plan), "", "memory report (predicted)", aligned(rows, width)]
    if expected:
        lines += ["", f"speed (predicted; {plan.costs.source})", aligned(expected, width)]
        if setup:
            lines.append(f"  beyond the fit: {SETUPS[setup]}; the numbers carry the error of the published runs "
                         "of such a setup (docs/planner_accuracy.md)")
    lines += ["", "speed floor (roofline: a lower bound of latency, an upper bound of throughput)",
              aligned(floor, width), "", answer(plan)]
    return "\n".join(lines + [f"note: {note}" for note in plan.notes])


# memory report row -> the corpus metric whose error band it carries (planner/bands.py)
MEMORY_BANDS = {"weights": "weights_gib", "KV cache": "kv_gib", "KV cache tokens": "kv_gib",
                "other memory": "other_gib"}


def memory_band(plan, label: str) -> str:
    """Beside a GPU plan's number, the error the corpus measured for it; on vLLM's CPU build the
    KV pool is exact (VLLM_CPU_KVCACHE_SPACE), so nothing is added there."""
    from servelab.planner.bands import band_note

    if plan.other is None or label not in MEMORY_BANDS:
        return ""
    return band_note(MEMORY_BANDS[label])


def expected_rows(plan, setup: str | None) -> list[tuple[str, str]]:
    """The speed model's numbers for one request alone (1,024-token prompt, 128 out), with their
    bands; none where no published run calibrates this GPU family (the roofline below is all).
    ``setup``: which of ``speed_model.SETUPS`` the plan is (``plan.speed_setup``), or None."""
    from servelab.planner.bands import ALONE, band_note
    from servelab.planner.speed_model import Engine, concurrency1, tpot_s

    costs = plan.costs
    if costs is None or not costs.calibrated:
        return []
    engine = Engine(plan.spec.model, plan.spec.gpu, 0.0, 0.0, max_num_batched_tokens=_batch_tokens(plan))
    one = concurrency1(costs, engine, 1024, 128)
    # the bands of published runs at concurrency 1 alone, as these numbers are (a setup the step
    # model has no term for: the band of the published runs of that setup, whatever their load, and
    # which way they missed)
    return [("TPOT, 1 request", f"{tpot_s(costs, 1024, 128) * 1000:.2f} ms{band_note('mean_tpot_ms' + ALONE, setup)}"),
            ("TTFT, 1k prompt", f"{one['mean_ttft_ms']:.1f} ms{band_note('mean_ttft_ms' + ALONE, setup)}"),
            ("tok/s, 1 request",
             f"{one['output_tok_s']:.1f} (1k in, 128 out){band_note('output_tok_s' + ALONE, setup)}")]


def _batch_tokens(plan) -> int:
    from servelab.planner.plan import default_batch

    return default_batch(plan.spec)[0]


def describe(plan) -> str:
    from servelab.planner.plan import quantization, tensor_parallel

    spec = plan.spec
    weights = quantization(spec)
    if weights == "none":  # the planner knows the bytes per weight, not bf16 from fp16
        weights = f"{spec.model.dtype_bytes * 8}-bit (not quantized)"
    return (f"{spec.model.name} on {spec.gpu.name} x{spec.gpu_count} ({spec.gpu.memory_gib:.1f} GiB each), "
            f"{spec.engine}, weights {weights}, KV {spec.kv_cache_dtype}, TP {tensor_parallel(spec)}")


def assumes(plan) -> list[str]:
    """The header line naming the vLLM release whose defaults the plan takes and the memory share
    it used (a plan left at its defaults is right only for that release: planner/vllm_defaults.py)."""
    from servelab.planner.vllm_defaults import vllm_defaults

    spec = plan.spec
    if spec.engine != "vllm":
        return []
    release = vllm_defaults(spec.vllm_version)
    if spec.gpu.name == "cpu":
        return [f"assumes: vLLM {release.version}'s defaults (--vllm-version); the CPU build's KV cache is "
                f"VLLM_CPU_KVCACHE_SPACE={spec.cpu_kv_space_gib} GiB"]
    given = "its default" if spec.gpu_memory_utilization == release.gpu_memory_utilization else "given"
    return [f"assumes: vLLM {release.version}'s defaults (--vllm-version); --gpu-memory-utilization "
            f"{spec.gpu_memory_utilization:g} ({given})"]


def budget_row(plan) -> list[tuple[str, str]]:
    """What vLLM may use of one GPU at the plan's utilization, and the rows above that fill it:
    weights + KV cache + other memory = ceil(memory x utilization) (planner/budget.py)."""
    from servelab.planner.budget import requested_bytes

    if plan.other is None:
        return []
    spec = plan.spec
    total = int(spec.gpu.memory_gib * GIB)
    share = requested_bytes(total, spec.gpu_memory_utilization)
    return [("vLLM's share", f"{share / GIB:.2f} GiB = {total / GIB:.2f} GiB x {spec.gpu_memory_utilization:g} "
                             "per GPU: weights + KV cache + other memory")]


def speed_rows(speed) -> list[tuple[str, str]]:
    batch = "-" if speed.compute_bound_batch is None else f"{speed.compute_bound_batch:,.0f} sequences"
    prefill = "-" if speed.prefill_per_1k_s is None else f"{speed.prefill_per_1k_s * 1000:.1f} ms"
    return [("TPOT at batch 1", f"{speed.tpot_batch1_s * 1000:.2f} ms (weights / peak bandwidth)"),
            ("compute-bound from", batch), ("prefill per 1k tok", prefill)]


def answer(plan) -> str:
    """A plan that does not fit never gets here (``planner.fit.require_fit``)."""
    count = plan.requests_at_once
    return f"fits: {count:,} request{'' if count == 1 else 's'} of {plan.context_tokens:,} tokens at once"


def _other(plan) -> str:
    if plan.other is None:
        return "-"
    o = plan.other
    return (f"{o.total / GIB:.2f} GiB (activations {o.activations / GIB:.2f}, non-torch {o.non_torch / GIB:.2f}, "
            f"CUDA graphs {o.cuda_graphs / GIB:.2f}; modelled)")


def _bytes(value) -> str:
    value = float(value)
    return f"{value / 1024:,.2f} KiB" if value >= 1024 else f"{value:,.0f} B"


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


def list_models() -> str:
    from servelab.planner import MODELS

    lines = [f"{'model':<44} {'params':>9} {'layers':>6} {'kv heads':>8} {'head dim':>8}"]
    for m in MODELS.values():
        lines.append(f"{m.name:<44} {m.total_params / 1e9:>8.2f}B {m.layers:>6} {m.kv_heads:>8} {m.head_dim:>8}")
    return "\n".join(lines)


def list_gpus() -> str:
    from servelab.planner import GPUS

    lines = [f"{'gpu':<10} {'GiB':>7} {'GB/s':>6} {'bf16 TF':>8} {'fp8 TF':>7}"]
    for g in GPUS.values():
        memory = "machine" if g.memory_gib is None else f"{g.memory_gib:.1f}"
        lines.append(f"{g.name:<10} {memory:>7} {g.bandwidth_gbs:>6g} {g.bf16_tflops:>8g} {g.fp8_tflops or '-':>7}")
    return "\n".join(lines)
