"""``servelab tune``: search engine knobs for the most throughput (or goodput) that
meets an SLO; print the ranking and the winning serve command.

    servelab tune --knob max-num-seqs=2,8,32,128 --max-concurrency 32 \\
        --dataset-name random --random-input-len 128 --random-output-len 64 --num-prompts 64
    servelab tune --knob enable-prefix-caching=on,off --knob max-num-batched-tokens=2048,8192 \\
        --loads 16,64 --slo ttft:500,tpot:50 --engine vllm --model Qwen/Qwen3-8B …
    servelab tune --knob model=default,/models/Qwen3-8B-AWQ --engine vllm --model /models/Qwen3-8B …

The load is ``--loads`` (with ``--over``) or the workload's own ``--max-concurrency``
(``--request-rate`` with ``--over rate``). Every config is one engine start; the
top ``--top`` are started again and repeated to ``--repeats`` runs per load.
Rerunning the same command resumes (``results/<name>/``).
"""

from __future__ import annotations

import argparse
import time

from servelab.cli.engine_args import (
    add_engine_arguments,
    add_load_arguments,
    add_study_arguments,
    engine_entry,
    engine_port,
    interruptible,
    parse_loads,
    sayer,
    simulated_line,
    workload_spec,
)
from servelab.flags.bench_serve import add_bench_arguments


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bench_arguments(p, runs_owned=True)
    g = p.add_argument_group("tune")
    g.add_argument("--knob", action="append", default=[], metavar="NAME=V1,V2",
                   help="engine knob and its values (repeatable): max-num-seqs, max-num-batched-tokens, "
                        "gpu-memory-utilization, block-size, max-model-len, enable-prefix-caching=on,off, "
                        "enable-chunked-prefill=on,off, model=default,PATH; other names pass as --NAME VALUE")
    add_load_arguments(g, "tune")
    g.add_argument("--objective", choices=("throughput", "goodput"), default="throughput",
                   help="what the score counts: output tok/s, or req/s meeting the SLO (default %(default)s)")
    g.add_argument("--top", type=int, default=2, help="configs repeated (default %(default)s)")
    g.add_argument("--repeats", type=int, default=2, help="runs per load for the top configs (default %(default)s)")
    add_study_arguments(p, "tune")
    add_engine_arguments(p)


def run(args: argparse.Namespace) -> int:
    from servelab.sweep.tune import run_tune
    from servelab.results.layout import TUNE_FILE
    from servelab.sweep.report import text

    plan = tune_plan(args)
    if args.simulate:  # a pre-ranking in the simulator; no engine starts
        from servelab.sweep import presim as sim_rank

        ranked = sim_rank.rank(plan)
        shown = sim_rank.text(plan, ranked)
        print(f"{shown}\n\nsaved: {sim_rank.save(plan, ranked, shown)}")
        return 0
    started = time.monotonic()
    outcome = interruptible(lambda: run_tune(plan, say=sayer("tune", plan.name)), "tune")
    if isinstance(outcome, int):
        return outcome
    print("\n".join(simulated_line(outcome.plan.engine)) + text(outcome))
    print(f"\nsection: {outcome.report}\nsummary: {plan.folder / TUNE_FILE}\n"
          f"tune done in {time.monotonic() - started:.0f} s")
    return 0 if outcome.winner is not None else 1


def tune_plan(args: argparse.Namespace):
    from servelab.errors import InputError
    from servelab.sweep.tune import TunePlan
    from servelab.search.knobs import parse_knob
    from servelab.search.slo import parse_slo

    if not args.knob:
        raise InputError("give at least one --knob NAME=V1,V2 (e.g. max-num-seqs=8,32)")
    loads = tuple(sorted(set(parse_loads(args.loads)))) if args.loads else (_own_load(args),)
    return TunePlan(
        name=args.name, engine=engine_entry(args), spec=workload_spec(args),
        knobs=tuple(parse_knob(k) for k in args.knob), loads=loads, over=args.over,
        slo=parse_slo(args.slo) if args.slo else None, objective=args.objective, top=args.top,
        repeats=args.repeats, results=args.results, warmup=args.warmup, port=engine_port(args), verbose=args.verbose)


def _own_load(args: argparse.Namespace) -> float:
    """The workload's own load becomes the one load (and leaves its flags: tune sets it per run)."""
    from servelab.errors import InputError

    if args.over == "concurrency":
        if args.max_concurrency is None:
            raise InputError("give the load: --max-concurrency N, or --loads 8,32")
        load, args.max_concurrency = args.max_concurrency, None
    else:
        if args.request_rate == float("inf"):
            raise InputError("give the load: --request-rate R, or --loads 1,2,4")
        load, args.request_rate = args.request_rate, float("inf")
    return float(load)
