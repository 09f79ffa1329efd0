"""``--model M --gpu G`` for the simulated engine: ``servelab plan``'s plan, run.

    servelab serve --engine sim --model Qwen/Qwen3-8B --gpu A40 [--quantization awq] [-- --max-model-len 8192]
    servelab bench --simulate --model Qwen/Qwen3-8B --gpu A40 --tokenizer DIR [bench flags]

The model and GPU are named exactly as for ``servelab plan`` (a table name, a local folder
or config.json, a hub id in the local cache; no downloads), because the plan is made by
``plan``'s own parser and ``make``: the same flags mean the same thing in all three
commands, and a bad --model or --gpu is ``plan``'s one line. ``planner.sim_engine`` turns
the plan into the simulated engine's limits and step model, labelled with their provenance.
"""

from __future__ import annotations

import argparse

# vLLM flags after serve's ``--`` that change the plan too (the sim server takes the same names)
PLAN_FLAGS = ("--max-model-len", "--max-num-seqs", "--max-num-batched-tokens", "--gpu-memory-utilization",
              "--kv-cache-dtype", "--tensor-parallel-size")


def planned(model: str, gpu: str, quantization: str | None = None, flags: dict | None = None):
    """The simulated engine (``planner.sim_engine.SimEngine``) for model × GPU × flags;
    ``flags``: plan flag -> value (e.g. {"--max-num-seqs": "64"}); InputError when it does not fit."""
    from servelab.cli import plan as plan_cli
    from servelab.cli.sim_flags import model_config
    from servelab.errors import InputError
    from servelab.planner import find_gpu
    from servelab.planner.files import load_model
    from servelab.planner.fit import require_fit
    from servelab.planner.sim_engine import sim_engine

    if find_gpu(gpu.partition(":")[0]) is None:  # plan's own message names flags this command lacks
        raise InputError(f"--gpu {gpu}: not in servelab's GPU table (see `servelab plan --list-gpus`; for another "
                         "GPU, `servelab plan --gpu-memory-gib … --gpu-bandwidth-gbs … --sim-step-model FILE`)")
    argv = ["--model", model, "--gpu", gpu, *(["--quantization", quantization] if quantization else [])]
    for flag, value in (flags or {}).items():
        argv += [flag] if value is True else [flag, str(value)]
    parser = argparse.ArgumentParser(prog="servelab plan", add_help=False, allow_abbrev=False)
    plan_cli.add_arguments(parser)
    plan = plan_cli.make(parser.parse_args(argv))
    require_fit(plan)
    return sim_engine(plan, model_config(load_model(model)))


def banner(engine) -> str:
    """The block serve prints for a planned sim engine: SIMULATED, and where each number came from."""
    from servelab.reports.rows import aligned

    return "SIMULATED engine, planned by servelab plan (no model runs)\n" + aligned(engine.rows())


def for_bench(args: argparse.Namespace, simulate: tuple):
    """``bench --simulate --model M --gpu G``: (EngineLimits, StepModel) from the plan.

    A ``--sim-*`` flag left at its default takes the plan's value; one given changes the
    plan (max-num-seqs, max-num-batched-tokens) or the engine (block size, KV tokens,
    prefix caching, --sim-step-model). The --sim-step-* costs are refused: with --gpu
    the plan is the step model, and two sources for it would leave the label lying."""
    import dataclasses

    from servelab.errors import InputError
    from servelab.sim.model import blocks_for_tokens
    from servelab.sim.options import LIMIT_FLAGS, STEP_FLAGS, dest

    if not args.simulate:
        raise InputError("--gpu/--quantization plan a simulated engine: add --simulate")
    if not args.model:
        raise InputError("--simulate --gpu needs --model: the model to plan, named as for servelab plan")
    given = {f"--{name}": getattr(args, dest(name)) for name, _, default, _ in LIMIT_FLAGS
             if getattr(args, dest(name)) != default}
    if args.sim_step_model is None and any(getattr(args, dest(n)) != d for n, d, _ in STEP_FLAGS):
        raise InputError("--sim-step-* with --gpu: the plan gives the step model; "
                         "pass --sim-step-model FILE to replace it")
    engine = planned(args.model, args.gpu, args.quantization,
                     {f: v for f, v in given.items() if f in PLAN_FLAGS})
    limits, model = simulate
    block = given.get("--block-size", engine.limits.block_size)
    kv = given.get("--kv-cache-tokens", engine.limits.kv_tokens)
    ours = dataclasses.replace(engine.limits, block_size=block, num_blocks=blocks_for_tokens(kv, block),
                               enable_prefix_caching=limits.enable_prefix_caching)
    return ours, model if args.sim_step_model else engine.model
