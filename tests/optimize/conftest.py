"""The optimizer's known truth in the simulator (its four limits: test_optimize_sim.py's docstring),
as a plan any test here can build."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from servelab.engines import EngineSpec
from servelab.flags.bench_serve import add_bench_arguments, bench_spec
from servelab.optimize.plan import OptimizePlan
from servelab.study.entries import EngineEntry

TRUTH = ("--max-num-seqs", "2", "--max-num-batched-tokens", "64", "--kv-cache-tokens", "2048",
         "--step-overhead-ms", "20", "--step-per-token-ms", "0.01")
WORKLOAD = ["--dataset-name", "random", "--random-input-len", "256", "--random-output-len", "64",
            "--num-prompts", "48", "--max-concurrency", "8"]


def spec_of(argv: list[str], tokenizer: str):
    parser = argparse.ArgumentParser()
    add_bench_arguments(parser, runs_owned=True)
    argv = [*argv, "--tokenizer", tokenizer]
    return bench_spec(parser.parse_args(argv), tuple(argv))


def _plan_of(tmp: Path, name: str, tokenizer: str, **kw) -> OptimizePlan:
    entry = EngineEntry("sim", EngineSpec(name="sim", kind="sim", model="sim", args=TRUTH), args=TRUTH)
    return OptimizePlan(name, entry, spec_of(WORKLOAD, tokenizer), "sim", results=tmp, fast=True,
                        operating_point=False, **kw)



@pytest.fixture(scope="session")
def plan_of(qwen3_path):
    """plan_of(results, name, **OptimizePlan fields): the truth's engine and workload."""
    return lambda tmp, name, **kw: _plan_of(tmp, name, qwen3_path, **kw)


@pytest.fixture(scope="session")
def workload_spec(qwen3_path):
    """workload_spec(extra flags): the truth's workload without its client cap (a grid sets the load)."""
    return lambda extra: spec_of([*WORKLOAD[:-2], *extra], qwen3_path)
