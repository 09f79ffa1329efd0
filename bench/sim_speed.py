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
from servelab.datasets.tokenizer import load_tokenizer
from servelab.flags.bench import parse_bench_argv
from servelab.flags.dataset import dataset_spec_from_args, tokenizer_spec_from_args
from servelab.study import bench

n = sys.argv[1] if len(sys.argv) > 1 else "2000"
args = parse_bench_argv(["--simulate", "--dataset-name", "sharegpt", "--num-prompts", n, "--disable-tqdm",
                         "--sim-max-num-seqs", "256", "--sim-max-num-batched-tokens", "8192",
                         "--sim-kv-cache-tokens", "400000"])
with contextlib.redirect_stderr(io.StringIO()):
    tokenizer = load_tokenizer(tokenizer_spec_from_args(args))
    samples = sample_requests(dataset_spec_from_args(args), tokenizer)
bench.load_tokenizer = lambda spec: tokenizer  # prepared above, outside the timing
bench.sample_requests = lambda spec, tok: samples
start = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()):
    outcome = bench.execute(args)
wall = time.perf_counter() - start
r = outcome.result
print(f"sim fast mode: {len(samples)} ShareGPT requests, {r['total_output_tokens']} output tokens, "
      f"simulated duration {r['duration']:.1f} s, wall {wall:.2f} s "
      f"({'within' if wall < 2.0 else 'OVER'} the 2 s target)")
