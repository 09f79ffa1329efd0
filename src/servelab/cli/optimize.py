"""``servelab optimize``: diagnose, change what the verdict names, keep it only when it is
better beyond noise, repeat; then the operating point and the serve line.

    servelab optimize --max-concurrency 2 --dataset-name random --random-input-len 128 \\
        --random-output-len 64 --num-prompts 32 --budget-runs 16 -- --max-num-seqs 2
    servelab optimize --engine vllm --model Qwen/Qwen3-8B --dataset-name sharegpt … --budget-minutes 60
    servelab optimize --engine sim --simulate --max-concurrency 4 … -- --max-num-seqs 2   # the model only

The workload (dataset, lengths, prompts, rate, seed) is fixed; the client's
--max-concurrency and --workers are free and reported beside the engine's flags.
Rerunning the same command resumes: recorded steps are replayed, not re-decided; the same
--name with other flags is refused rather than replacing the record.
"""

from __future__ import annotations

import argparse
import sys

from servelab.cli import engine_args as given  # the engine, workload and results flags tune and sweep take
from servelab.flags.bench_serve import add_bench_arguments, reword


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bench_arguments(p, runs_owned=True)
    reword(p, "simulate", "with --engine sim (its flags after --): the simulated engine's fast mode, no server "
                          "and no HTTP; every number is SIMULATED (another engine refuses it)")
    g = p.add_argument_group("optimize", description=(
        "RESULTS/NAME/optimize.json is the record: rerunning the same command (same --name, engine, workload "
        "and optimize flags) resumes it, reusing its runs and saying so; the same --name with another "
        "definition is refused (give another --name, or delete RESULTS/NAME to start anew)."))
    g.add_argument("--objective", choices=("throughput", "goodput", "latency"), default="throughput",
                   help="output tok/s, req/s meeting --slo, or mean TTFT (default %(default)s; a finite "
                        "--request-rate the engine keeps up with turns throughput into latency, and says so)")
    g.add_argument("--slo", default=None, metavar="ttft:MS,tpot:MS,e2el:MS", help="p99 latency limits")
    g.add_argument("--budget-runs", type=int, default=None, metavar="N",
                   help="measured runs at most (each repeat is one; simulated runs are free)")
    g.add_argument("--budget-minutes", type=float, default=None, metavar="M", help="stop after M minutes")
    g.add_argument("--repeats", type=int, default=2, help="runs per configuration (default %(default)s)")
    g.add_argument("--simulate-first", action="store_true",
                   help="rank each verdict's changes on the simulated engine before spending real runs")
    g.add_argument("--knobs", default=None, metavar="NAME,NAME",
                   help="a command engine: the flags it takes (e.g. max-num-seqs,max-num-batched-tokens)")
    g.add_argument("--alternative-model", action="append", default=[], metavar="M",
                   help="a checkpoint to try instead of the model (e.g. an AWQ/FP8 one: a local folder or a name "
                        "as the engine takes it; repeatable or comma-separated), for a KV or memory-bandwidth "
                        "limit; the engine is restarted with it, the requests and tokenizer stay the workload's. "
                        "The sim engine: a --step-model file (its stand-in for a model)")
    g.add_argument("--no-operating-point", dest="operating_point", action="store_false",
                   help="stop after the knobs: no load ladder on the best configuration")
    g.add_argument("--json", action="store_true", help="print optimize.json on stdout (progress on stderr)")
    given.add_study_arguments(p, "optimize")
    given.add_engine_arguments(p)


def run(args: argparse.Namespace) -> int:
    from servelab.optimize.run import optimize_command, text

    say = given.sayer("optimize", args.name)
    if args.json:
        say = (lambda s: print(f"[optimize {args.name}] {s}", file=sys.stderr, flush=True))
    outcome = given.interruptible(lambda: optimize_command(_plan(args), say), "optimize")
    if isinstance(outcome, int):
        return outcome
    record, path = outcome
    if args.json:
        from servelab.optimize.record import dumps

        print(dumps(record))
    else:
        print(text(record, path))
    return 0


def _plan(args: argparse.Namespace):
    from servelab.errors import InputError
    from servelab.optimize.plan import OptimizePlan
    from servelab.optimize.run import table_kind
    from servelab.search.slo import parse_slo

    entry = given.engine_entry(args)
    if args.simulate and entry.spec.kind != "sim":
        raise InputError("--simulate runs the simulated engine's fast mode: give --engine sim (its flags after --)")
    knobs = tuple(k.strip().removeprefix("--") for k in args.knobs.split(",") if k.strip()) if args.knobs else None
    return OptimizePlan(
        name=args.name, engine=entry, spec=given.workload_spec(args), kind=table_kind(entry), objective=args.objective,
        slo=parse_slo(args.slo) if args.slo else None, repeats=args.repeats, budget_runs=args.budget_runs,
        budget_minutes=args.budget_minutes, simulate_first=args.simulate_first, knobs=knobs, results=args.results,
        warmup=args.warmup, port=given.engine_port(args), verbose=args.verbose, fast=bool(args.simulate),
        operating_point=args.operating_point,
        alternative_models=tuple(m.strip() for a in args.alternative_model for m in a.split(",") if m.strip()))
