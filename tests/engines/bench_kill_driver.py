"""servelab mid-bench, for kill tests: an engine (the mock, launched as a `command`
engine in its own process group) plus a running `servelab bench` against it.

    python bench_kill_driver.py PORT LOG_DIR BENCH_FILE [--raise-at N]

BENCH_FILE gets the engine's pgid the moment the bench's clock starts.
--raise-at N makes the pacer raise RuntimeError when it reaches request N,
standing in for any bug in the code that runs while the engine serves.
"""

import argparse
import json
import sys
from pathlib import Path

from servelab.engines import EngineSpec, sigterm_as_interrupt, start_engine
from servelab.flags.bench_serve import parse_bench_spec
from servelab.loadgen import pacer as runner
from servelab.measure.run import execute


def mock_engine(port: int) -> EngineSpec:
    config = {"port": port, "ttft_ms": 20, "itl_ms": 50, "model": "mock"}
    return EngineSpec(name="mock", kind="command", model="mock", port=port, ready_timeout_s=30,
                      command=[sys.executable, "-m", "servelab.mock", json.dumps(config)],
                      ready_url=f"http://127.0.0.1:{port}/health")


def fail_at(n: int) -> None:
    original = runner.wait_until
    seen = [0]

    async def wait_until(t_ns, stopper):
        seen[0] += 1
        if seen[0] > n:
            raise RuntimeError("injected failure mid-bench")
        return await original(t_ns, stopper)

    runner.wait_until = wait_until


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("port", type=int)
    p.add_argument("log_dir", type=Path)
    p.add_argument("bench_file", type=Path)
    p.add_argument("--raise-at", type=int, default=None)
    p.add_argument("--tokenizer", required=True)
    a = p.parse_args()
    if a.raise_at is not None:
        fail_at(a.raise_at)
    with sigterm_as_interrupt(), start_engine(mock_engine(a.port), a.log_dir, progress=False) as engine:
        args = parse_bench_spec(["--base-url", engine.base_url, "--model", "mock", "--tokenizer", a.tokenizer,
                                 "--dataset-name", "random", "--random-input-len", "8", "--random-output-len", "40",
                                 "--num-prompts", "200", "--max-concurrency", "4", "--request-rate", "20",
                                 "--disable-tqdm"])
        execute(args, on_start=lambda counters: a.bench_file.write_text(str(engine.pid)))


if __name__ == "__main__":
    main()
