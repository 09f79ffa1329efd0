"""``servelab sweep``: a load ladder on one engine — where throughput stops growing
(the knee, the operating point) and, with ``--slo``, the most load that meets it.

    servelab sweep --dataset-name random --random-input-len 128 --random-output-len 64 --num-prompts 64
    servelab sweep --loads 1,4,16,64 --slo ttft:500,tpot:50 --dataset-name sharegpt --num-prompts 200
    servelab sweep --over rate --start 0.5 --stop 16 --max-concurrency 256 …
    servelab sweep --engine vllm --model Qwen/Qwen3-8B --stop 256 … -- --max-num-seqs 256
    servelab sweep --base-url http://gpu-box:8000 …

Every ``servelab bench`` flag sets the base workload (all but the swept one, which
the sweep sets per point); ``--model``/``--host``/``--port`` say where the engine
is; after ``--``: the engine's own flags. Rerunning the same command resumes:
points done before are kept (``results/<name>/``).
"""

from __future__ import annotations

import argparse
import time

from servelab.cli import engine_args
from servelab.flags.bench_serve import add_bench_arguments, hide_simulate


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bench_arguments(p, runs_owned=True)
    hide_simulate(p)  # refused below: not offered
    g = p.add_argument_group("sweep")
    engine_args.add_load_arguments(g)
    g.add_argument("--start", type=float, default=1, help="first load of the geometric ladder (default %(default)s)")
    g.add_argument("--stop", type=float, default=64, help="last load (default %(default)s)")
    g.add_argument("--factor", type=float, default=2.0, help="ladder step factor (default %(default)s)")
    g.add_argument("--min-gain", type=float, default=5.0, metavar="PCT",
                   help="loads within this of the best throughput are its plateau … (default %(default)s %%)")
    g.add_argument("--max-latency-growth", type=float, default=20.0, metavar="PCT",
                   help="… saturated when latency grows more than this across it (default %(default)s %%)")
    g.add_argument("--latency-key", default="median_e2el", help="latency the knee watches (default %(default)s)")
    g.add_argument("--tolerance", type=float, default=10.0, metavar="PCT",
                   help="--slo: bisect until the bracket is this narrow (default %(default)s %%)")
    g.add_argument("--max-bisect", type=int, default=4, help="--slo: most bisection runs (default %(default)s)")
    g.add_argument("--no-plot", action="store_true", help="skip the PNG curves")
    engine_args.add_study_arguments(p, "sweep")
    engine_args.add_engine_arguments(p)


def run(args: argparse.Namespace) -> int:
    from servelab.errors import InputError
    from servelab.flags.bench_serve import simulated_flag
    from servelab.sweep.ladder import run_sweep

    if flag := simulated_flag(args):  # each point would run in the simulator beside an engine started for nothing
        raise InputError(f"sweep {flag} is not supported: sweep the simulated engine with --engine sim "
                         "(its flags after --), or pre-rank knobs with tune --simulate")
    plan = sweep_plan(args)
    started = time.monotonic()
    outcome = engine_args.interruptible(lambda: run_sweep(plan, say=engine_args.sayer("sweep", plan.name)), "sweep")
    if isinstance(outcome, int):
        return outcome
    print(report(outcome, time.monotonic() - started))
    return 0


def sweep_plan(args: argparse.Namespace):
    from servelab.sweep.ladder import SweepPlan
    from servelab.search.slo import parse_slo

    check_percent(args, ("min_gain", "max_latency_growth", "tolerance"))
    return SweepPlan(
        name=args.name, engine=engine_args.engine_entry(args), spec=engine_args.workload_spec(args),
        ladder=tuple(ladder(args)), over=args.over, results=args.results, min_gain=args.min_gain / 100,
        max_latency_growth=args.max_latency_growth / 100, latency_key=args.latency_key,
        slo=parse_slo(args.slo) if args.slo else None, rel_tol=args.tolerance / 100,
        max_bisect=args.max_bisect, warmup=args.warmup, port=engine_args.engine_port(args), plots=not args.no_plot,
        verbose=args.verbose, ladder_flag="--loads" if args.loads else "--stop")


def check_percent(args, names) -> None:
    from servelab.errors import InputError

    for name in names:
        if getattr(args, name) < 0:
            raise InputError(f"--{name.replace('_', '-')} must be >= 0 (percent)")


def ladder(args: argparse.Namespace) -> list[float]:
    from servelab.errors import InputError
    from servelab.search.knee import geometric_ladder

    integer = args.over == "concurrency"
    if args.loads:
        return sorted(set(engine_args.parse_loads(args.loads)))
    if not (0 < args.start <= args.stop) or args.factor <= 1:
        raise InputError("--start must be > 0 and <= --stop, and --factor > 1")
    return geometric_ladder(args.start, args.stop, args.factor, integer=integer)


def report(outcome, elapsed_s: float) -> str:
    from servelab.results.layout import SWEEP_FILE
    from servelab.sweep.ladder_text import table, verdict_lines

    plan = outcome.plan
    lines = ["", *engine_args.simulated_line(plan.engine), table(outcome), "", *verdict_lines(outcome), ""]
    lines += [f"plot: {p}" for p in outcome.plots]
    lines += [f"summary: {plan.folder / SWEEP_FILE}", f"sweep done in {elapsed_s:.0f} s"]
    return "\n".join(lines)
