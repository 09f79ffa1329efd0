"""``servelab bench`` — ``vllm bench serve``'s flags, console block and result
JSON, on a client built to measure. Thin: parse, call the library.

``--simulate --model M --gpu G [--quantization Q]`` runs on the simulated engine that
``servelab plan`` plans for M on G (``cli/sim_plan.py``): one step from a plan to numbers,
every one labelled SIMULATED with the plan's provenance.
"""

from __future__ import annotations

import argparse

from servelab.flags.bench_serve import add_bench_arguments


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bench_arguments(p)
    g = p.add_argument_group("planned simulated engine (with --simulate)")
    g.add_argument("--gpu", metavar="NAME[:COUNT]",
                   help="simulate the engine servelab plan plans for --model on this accelerator "
                        "(its KV cache, limits and step model)")
    g.add_argument("--quantization", help="with --gpu: the weights' format, as servelab plan takes it")


def run(args: argparse.Namespace) -> int:
    import dataclasses
    import sys

    from servelab.flags.bench_serve import bench_spec
    from servelab.measure.run import execute  # heavy imports only now

    spec = bench_spec(args, tuple(sys.argv[1:]))
    if args.gpu or args.quantization:
        from servelab.cli.sim_plan import for_bench
        from servelab.errors import InputError

        if not args.gpu:
            raise InputError("--quantization goes with --gpu (and --simulate)")
        spec = dataclasses.replace(spec, simulate=for_bench(args, spec.simulate))
    return execute(spec).exit_code
