"""How well the simulator predicts a real engine once calibrated on it: measure the
embedded vLLM CPU engine (SmolLM2-135M) at a few loads and --max-num-seqs values, three
repeats each; calibrate on some points with ``servelab plan --calibrate`` and predict the
others (loads and a --max-num-seqs it never saw); print the table for docs/sim.md.

    python bench/sim_accuracy.py measure OUT_DIR   # starts the engine (under the engine lock)
    python bench/sim_accuracy.py fit OUT_DIR       # servelab plan --calibrate …, then the Markdown table

Runs are short on purpose (8–32 prompts, random 64→64 tokens): this is a shared 2-core
machine, and each point is repeated 3 times, interleaved (repeat 1 of every point, then
repeat 2, …) so a slow minute of the machine lands on every point rather than on one.
The error of a prediction is judged against the repeats' range (``planner.replay``): 0
inside [min, max], else the distance to the nearer end, relative to that end.
"""

from __future__ import annotations

import dataclasses
import fcntl
import sys
from pathlib import Path

from servelab.flags.bench_serve import parse_bench_spec
from servelab.measure.run import execute

# (name, engine --max-num-seqs or None for the CPU default of 128, concurrency, prompts, fitted on)
POINTS = (
    ("c1", None, 1, 8, True),
    ("c4", None, 4, 16, True),
    ("c16", None, 16, 32, True),
    ("seqs2-c8", 2, 8, 16, True),
    ("c2", None, 2, 8, False),
    ("c8", None, 8, 16, False),
    ("seqs4-c8", 4, 8, 16, False),
)
REPEATS = 3
BUDGET_S = 15 * 60  # the whole measurement; each engine start gets its share, whole repeats only
WORKLOAD = ["--dataset-name", "random", "--random-input-len", "64", "--random-output-len", "64",
            "--ignore-eos", "--seed", "0", "--disable-tqdm", "--save-result"]


def workload(conc: int, n: int) -> list[str]:
    return [*WORKLOAD, "--max-concurrency", str(conc), "--num-prompts", str(n)]


def measure(out: Path) -> None:
    """Every point × REPEATS, one engine start per --max-num-seqs value, repeats interleaved;
    an engine stops starting repeats once its share of BUDGET_S is spent (a loaded machine)."""
    import time

    from servelab.engines import embedded_engine_spec, start_engine
    from servelab.measure.facts import engine_context

    out.mkdir(parents=True, exist_ok=True)
    configs = list(dict.fromkeys(p[1] for p in POINTS))
    with open("/tmp/servelab-engine.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for seqs in configs:
            spec = embedded_engine_spec(port=8391)
            if seqs is not None:
                spec = dataclasses.replace(spec, args=(*spec.args, "--max-num-seqs", str(seqs)))
            deadline = time.monotonic() + BUDGET_S / len(configs)
            with start_engine(spec, out / f"engine-{seqs}") as engine:
                context = {"engine": engine_context(engine)}  # KV size, block size, flags: what a replay needs
                for repeat in range(REPEATS):
                    if repeat and time.monotonic() > deadline:
                        print(f"sim_accuracy: max-num-seqs {seqs}: {repeat} repeat(s), out of time", file=sys.stderr)
                        break
                    _one_repeat(engine, context, seqs, repeat, out)


def _one_repeat(engine, context: dict, seqs, repeat: int, out: Path) -> None:
    for name, s, conc, n, _ in POINTS:
        if s == seqs:
            argv = ["--base-url", engine.base_url, "--model", engine.model, *workload(conc, n),
                    "--result-dir", str(out / name), "--result-filename", f"r{repeat}.json"]
            if execute(parse_bench_spec(argv), context=context).exit_code != 0:  # interrupted: stop here
                sys.exit(f"sim_accuracy: {name} repeat {repeat} did not complete")


def fit(out: Path) -> None:
    """``servelab plan --calibrate`` on the fitted points, the others held out; then the table."""
    from servelab.cli.main import main

    fitted = [str(out / p[0]) for p in POINTS if p[4]]
    held = [str(out / p[0]) for p in POINTS if not p[4]]
    sys.exit(main(["plan", "--max-model-len", "2048", "--calibrate", *fitted, "--hold-out", *held,
                   "--sim-step-model", str(out / "step_model.json")]))


if __name__ == "__main__":
    {"measure": measure, "fit": fit}[sys.argv[1]](Path(sys.argv[2]))
