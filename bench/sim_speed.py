"""How fast the fast mode is: a 2,000-request ShareGPT run through ``servelab bench
--simulate``, timed from the end of dataset preparation (which a measured run does
before its clock starts too) to the result. Target: under 2 s.

    PYTHONPATH=src python bench/sim_speed.py [NUM_PROMPTS]
"""

import contextlib
import io
import sys
import time

from servelab.datasets import sample_requests
from servelab.flags.bench_serve import parse_bench_spec
from servelab.measure import run as measure

n = sys.argv[1] if len(sys.argv) > 1 else "2000"
spec = parse_bench_spec(["--simulate", "--dataset-name", "sharegpt", "--num-prompts", n, "--disable-tqdm",
                         "--sim-max-num-seqs", "256", "--sim-max-num-batched-tokens", "8192",
                         "--sim-kv-cache-tokens", "400000"])
with contextlib.redirect_stderr(io.StringIO()):
    tokenizer = measure.bench_tokenizer(spec, "sim")
    samples = sample_requests(spec.dataset, tokenizer)
measure.bench_tokenizer = lambda spec, model: tokenizer  # prepared above, outside the timing
measure.prepare_requests = lambda spec, tok: samples
start = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()):
    outcome = measure.execute(spec)
wall = time.perf_counter() - start
r = outcome.result
print(f"sim fast mode: {len(samples)} ShareGPT requests, {r['total_output_tokens']} output tokens, "
      f"simulated duration {r['duration']:.1f} s, wall {wall:.2f} s "
      f"({'within' if wall < 2.0 else 'OVER'} the 2 s target)")
