"""The demo: the embedded engine (vLLM's CPU build + SmolLM2-135M-Instruct,
offline), benchmarked with real ShareGPT conversations, then stopped.

Sized for a 2-core machine: 32 ShareGPT prompts, outputs fixed at 128 tokens,
8 in flight — about a minute of load after a ~30 s engine start.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from servelab.engines import embedded_engine_spec, start_engine
from servelab.flags.bench import parse_bench_argv
from servelab.study.bench import BenchOutcome, execute


@dataclasses.dataclass(frozen=True, slots=True)
class DemoPlan:
    out_dir: Path
    port: int = 8000
    num_prompts: int = 32
    max_concurrency: int = 8
    output_len: int = 128
    seed: int = 0


def bench_argv(plan: DemoPlan, base_url: str, model: str) -> list[str]:
    return ["--backend", "vllm", "--base-url", base_url, "--model", model,
            "--dataset-name", "sharegpt", "--num-prompts", str(plan.num_prompts),
            "--sharegpt-output-len", str(plan.output_len), "--max-concurrency", str(plan.max_concurrency),
            "--seed", str(plan.seed), "--temperature", "0", "--save-result",
            "--result-dir", str(plan.out_dir), "--result-filename", "bench.json"]


def engine_context(engine) -> dict:
    """What the result should say about the engine it measured."""
    spec = engine.spec
    return {"engine": {"name": spec.name, "kind": spec.kind, "model": spec.model, "args": list(spec.args),
                       "base_url": engine.base_url, "ready_s": engine.ready_s,
                       "memory_report": engine.memory_report.to_dict(), "log": str(engine.log_path)}}


def run_demo(plan: DemoPlan, on_ready=None) -> tuple[BenchOutcome, dict]:
    """Start → (on_ready(engine)) → bench → stop. Returns the outcome and the engine context."""
    plan.out_dir.mkdir(parents=True, exist_ok=True)
    spec = embedded_engine_spec(port=plan.port)
    with start_engine(spec, plan.out_dir) as engine:
        if on_ready is not None:
            on_ready(engine)
        context = engine_context(engine)
        args = parse_bench_argv(bench_argv(plan, engine.base_url, engine.model))
        outcome = execute(args, context=context)
    return outcome, context
