"""``servelab scale``: N replicas of one engine, each on its own port and share of the
machine; one measured alone, then all at once from one start instant; throughput per
replica and in total counted in their common window, and the scaling efficiency.

    servelab scale --replicas 2 --dataset-name random --random-input-len 64 --random-output-len 64 \\
        --num-prompts 64 --max-concurrency 4
    servelab scale --replicas 2 --engine llamacpp --model model.gguf … -- --parallel 4
    servelab scale --replicas 4 --engine command --ready-url 'http://127.0.0.1:{port}/health' \\
        … -- ./my-server --port {port} --name r{replica}

Every ``servelab bench`` flag sets the workload each replica gets; the engine flags
are ``servelab serve``'s (after ``--``: the engine's own flags, or the command line).
Replica i listens on --port + i (default 8000 + i). With ``--ray [ADDRESS]`` replica i
is started on Ray node i mod M (round-robin when there are more replicas than nodes)
by the same engine code, with that node's share of its cores, and its client runs on
that node too; records come back onto this machine's clock (offsets in the result).
"""

from __future__ import annotations

import argparse
import sys

from servelab.cli.engine_args import add_engine_arguments, add_study_arguments
from servelab.flags.bench_serve import add_bench_arguments, hide_simulate, simulated_flag


RAY_HELP = ("start each replica on a node of a Ray cluster (default address: auto), round-robin when there are "
            "more replicas than nodes, with its client on the same node; clocks aligned by an NTP-style exchange, "
            "nodes and offsets in the result; needs servelab[ray]")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bench_arguments(p, runs_owned=True, ray_help=RAY_HELP)  # bench's flag, scale's meaning
    hide_simulate(p)  # refused in scale_plan: not offered
    g = p.add_argument_group("scale")
    g.add_argument("--replicas", type=int, default=2, help="replicas to start and load together (default %(default)s)")
    g.add_argument("--repeats", type=int, default=2,
                   help="times replica 0 is measured alone: the noise of one replica (default %(default)s)")
    add_study_arguments(p, "scale")
    add_engine_arguments(p)


def run(args: argparse.Namespace) -> int:
    from servelab.engines import Terminated, sigterm_as_interrupt
    from servelab.scale.report import write_scale_report
    from servelab.scale.run import run_scale
    from servelab.scale.result import render

    plan = scale_plan(args)
    with sigterm_as_interrupt():
        try:
            outcome = run_scale(plan, say=lambda text: print(f"[scale {plan.name}] {text}", flush=True))
        except KeyboardInterrupt as exc:
            stopped = "terminated" if isinstance(exc, Terminated) else "interrupted"
            print(f"servelab: {stopped}; every replica stopped", file=sys.stderr)
            return 143 if isinstance(exc, Terminated) else 130
    if args.verbose:
        _print_consoles(outcome.result)
    report = write_scale_report(outcome.path)
    print("\n" + render(outcome.result) + f"\n\nresult: {outcome.path}\nreport: {report}")
    return 0


def scale_plan(args: argparse.Namespace):
    from servelab.engines.replicas import placed, replica_specs
    from servelab.errors import InputError
    from servelab.scale.plan import ScalePlan, machine_shares

    if args.replicas < 1:
        raise InputError("--replicas must be at least 1")
    refused = simulated_flag(args) or (args.workers != 1 and "--workers")
    if refused:
        raise InputError(f"scale runs one client process per replica: {refused} does not apply "
                         "(simulate with --engine sim; --ray places each replica and its client on a Ray node)")
    base = base_engine(args)
    if args.ray is None:
        replicas = replica_specs(base, args.replicas, *machine_shares())
    else:  # each node gives its replica a share of its own cores (scale/ray.py)
        replicas = [placed(base, i) for i in range(args.replicas)]
    return ScalePlan(name=args.name, results=args.results, replicas=tuple(replicas), spec=workload(args),
                     repeats=args.repeats, warmup=args.warmup, progress=not args.disable_tqdm, ray=args.ray)


def base_engine(args: argparse.Namespace):
    """The engine spec every replica is made from, as ``servelab sweep`` builds it; a command
    engine's ready URL may name ``{port}`` (filled with the first replica's port here)."""
    from servelab.cli.engine_args import engine_entry
    from servelab.engines.replicas import fill
    from servelab.engines.spec import DEFAULT_PORT

    if args.ready_url and "{port}" in args.ready_url:
        port = args.port if args.port is not None else DEFAULT_PORT
        args = argparse.Namespace(**{**vars(args), "ready_url": fill(args.ready_url, port, 0), "port": port})
    return engine_entry(args).spec


def workload(args: argparse.Namespace):
    from servelab.cli.engine_args import workload_spec

    # --ray says where the replicas run; each replica's client is one process on its node
    return workload_spec(argparse.Namespace(**{**vars(args), "ray": None}))


def _print_consoles(result: dict) -> None:
    from pathlib import Path

    from servelab.results.layout import CONSOLE_FILE

    for r in result["together"]["replicas"]:
        if r["result"]:
            print(f"\n--- replica {r['replica']} (together) ---")
            print((Path(r["result"]) / CONSOLE_FILE).read_text(encoding="utf-8"))
