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
    add_quality_arguments(p)


def add_quality_arguments(p: argparse.ArgumentParser) -> None:
    q = p.add_argument_group(
        "quality (judged after the run on its kept answers; each implies --save-detailed and, "
        "unless given, --temperature 0)")
    q.add_argument("--quality-reference", nargs="+", metavar="RESULT.json",
                   help="a reference run of the same requests (then its repeats, which measure its own floor): "
                        "the share of answers identical to it, the tokens before the first divergence, and the "
                        "verdict 'same within its own variation' or 'diverges beyond it' (below the reference's "
                        "own agreement beyond chance); a sampled run is 'not comparable: sampled'")
    q.add_argument("--quality-tasks", metavar="builtin|FILE.jsonl",
                   help="send prompts with known answers and score them (Wilson 95%% interval); 'builtin': "
                        "320 seeded questions; a file: lines with prompt or messages and one of answer, regex, "
                        "json_schema, choices. With a reference: 'keeps the reference's score' (>= "
                        "--quality-ratio of it, paired by item), 'worse', or 'not distinguishable with N items'")
    q.add_argument("--quality-ratio", type=float, default=0.99, metavar="R",
                   help="the task score must be >= R x the reference's (default: MLPerf's %(default)s)")
    q.add_argument("--sampling-seed", type=int, default=None, metavar="N",
                   help="sent as every request's 'seed' (the server's sampling seed; not the dataset's --seed)")


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
    return judged_run(spec, args, execute)


def judged_run(spec, args: argparse.Namespace, execute) -> int:
    """The run, with --quality-* applied (quality/workload.py): tasks become its requests."""
    import tempfile

    from servelab.config import QualitySpec
    from servelab.errors import InputError
    from servelab.quality.workload import judged, with_tasks

    if not 0 < args.quality_ratio <= 1:
        raise InputError(f"--quality-ratio must be in (0, 1], got {args.quality_ratio}")
    quality = QualitySpec(references=tuple(args.quality_reference or ()), tasks=args.quality_tasks,
                          ratio=args.quality_ratio)
    spec = judged(spec, quality, args.sampling_seed)
    check_references(quality.references)
    if quality.tasks is None:
        return execute(spec).exit_code
    with tempfile.TemporaryDirectory(prefix="servelab-quality-") as folder:
        return execute(with_tasks(spec, folder)).exit_code


def check_references(paths) -> None:
    """Before the run: each reference is readable and kept its answers (one line if not)."""
    from servelab.quality.judge import read_result
    from servelab.quality.responses import Responses

    for path in paths:
        Responses.of_result(read_result(path), path)
