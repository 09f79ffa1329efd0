"""``servelab bench`` — ``vllm bench serve``'s flags, console block and result
JSON, on a client built to measure. Thin: parse, call the library."""

from __future__ import annotations

import argparse

from servelab.flags.bench_serve import add_bench_arguments


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bench_arguments(p)


def run(args: argparse.Namespace) -> int:
    import sys

    from servelab.flags.bench_serve import bench_spec
    from servelab.measure.run import execute  # heavy imports only now

    return execute(bench_spec(args, tuple(sys.argv[1:]))).exit_code
