"""A resumed ``optimize --simulate-first`` given other ``--sim-*`` values must not read back the
runs made with the old ones (issue 33): the workload's simulated engine is part of a run's identity.

The pre-ranker (``SimMeasurer`` under ``NAME/presim``) runs the workload of a real-engine
optimize, whose spec was parsed without ``--simulate``: its ``--sim-*`` flags reach the
simulated runs, so they must reach the runs' identity too."""

from __future__ import annotations

from servelab.engines import EngineSpec
from servelab.optimize.config import Config
from servelab.optimize.measure import SimMeasurer
from servelab.study.entries import EngineEntry

ARGS = ("--max-num-seqs", "2")
ENGINE = EngineEntry("vllm", EngineSpec(name="vllm", kind="vllm", model="Qwen/Qwen3-8B", args=ARGS), args=ARGS)


def presim(tmp_path, workload_spec, overhead_ms: str) -> SimMeasurer:
    spec = workload_spec(["--max-concurrency", "8", "--sim-step-overhead-ms", overhead_ms])
    assert spec.simulate is None  # as an optimize of a real engine parses its workload
    return SimMeasurer("opt/presim", tmp_path, ENGINE, spec, None)


def test_other_sim_flags_do_not_reuse_the_runs_made_with_the_old_ones(tmp_path, workload_spec):
    first = presim(tmp_path, workload_spec, "20").measure(Config(ARGS, {}, 8), 1)
    again = presim(tmp_path, workload_spec, "20").measure(Config(ARGS, {}, 8), 1)
    other = presim(tmp_path, workload_spec, "60").measure(Config(ARGS, {}, 8), 1)
    assert (first.fresh, again.fresh) == (1, 0)  # the same flags resume
    assert other.fresh == 1, "a 60 ms step overhead read back the run made with 20 ms"
    assert other.results[0]["output_throughput"] < first.results[0]["output_throughput"]


def test_a_workload_with_no_sim_values_keeps_the_identity_it_had():
    """The hashes b7366a5 gave (before ``sim_flags``): a folder or record written then still resumes."""
    from servelab.flags.bench_serve import parse_bench_spec
    from servelab.optimize.plan import OptimizePlan, definition
    from servelab.study.layout import run_hash

    args = ("--max-num-seqs", "2")
    engine = EngineEntry("sim", EngineSpec(name="sim", kind="sim", model="sim", args=args), args=args)
    for extra, hashes in (([], ("3fd63daffa2fdab4", "20619dc3c980445a")),
                          (["--simulate"], ("dc1432c6adc8b527", "fe22f4834bdc2d21"))):
        spec = parse_bench_spec(["--dataset-name", "random", *extra])
        assert (run_hash(engine, spec), definition(OptimizePlan("o", engine, spec, "sim"))) == hashes
    given = parse_bench_spec(["--dataset-name", "random", "--sim-step-overhead-ms", "20"])
    assert run_hash(engine, given) != "3fd63daffa2fdab4"  # was equal on b7366a5: argv alone carried the value
