"""Cold vs warm preparation of 2,000 ShareGPT prompts (the prepared-request cache,
``servelab/datasets/cache.py``): the time from a fresh process's start of
preparation — tokenizer load, dataset read and tokenization, or the cache's check
and read — to the requests in hand, as ``servelab bench`` does before its first
request. Each figure is a new process (imports excluded), median of 3.

    PYTHONPATH=src python bench/prep_cache.py [NUM_PROMPTS]
"""

import os
import statistics
import subprocess
import sys
import tempfile

CHILD = """
import contextlib, io, sys, time
from servelab.flags.bench_serve import parse_bench_spec
from servelab.measure.run import bench_tokenizer
from servelab.datasets import prepare_requests
spec = parse_bench_spec(["--dataset-name", "sharegpt", "--num-prompts", sys.argv[1], "--model", "m"])
start = time.perf_counter()
with contextlib.redirect_stderr(io.StringIO()):
    tokenizer = bench_tokenizer(spec, "m")
    loaded = time.perf_counter()
    requests = prepare_requests(spec.dataset, tokenizer)
end = time.perf_counter()
assert len(requests.requests) == int(sys.argv[1])  # a Sample: the requests and the arrival state
print(f"{end - start:.3f} {loaded - start:.3f}")
"""


def run(n: str, cache: str) -> tuple[float, float]:
    env = {**os.environ, "SERVELAB_CACHE_DIR": cache}
    out = subprocess.run([sys.executable, "-c", CHILD, n], env=env, capture_output=True, text=True, check=True)
    total, tokenizer = map(float, out.stdout.split())
    return total, tokenizer


def median(runs: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def main() -> None:
    n = sys.argv[1] if len(sys.argv) > 1 else "2000"
    off = median([run(n, "off") for _ in range(3)])
    cold, warm = [], []
    for _ in range(3):
        with tempfile.TemporaryDirectory() as folder:
            cold.append(run(n, folder))  # an empty cache: prepared, then written
            warm.append(run(n, folder))  # the same flags again: read back, checked
    for name, (total, tok) in (("no cache", off), ("cold", median(cold)), ("warm", median(warm))):
        print(f"{name:>9}: {total:.2f} s to {n} prepared ShareGPT requests (tokenizer load {tok:.2f} s)")


if __name__ == "__main__":
    main()
