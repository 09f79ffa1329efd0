"""``servelab optimize`` on the embedded vLLM CPU engine, from a deliberately capped baseline.

The engine starts with ``--max-num-seqs 2`` and the client sends at most 2 requests at once
(``--max-concurrency 2``): both caps are the limit, and the method should find and lift them
(raising the client's cap alone moves the queue into the engine; the knob table raises the
two together), then find what limits next on these CPUs, inside a stated run budget. It
prints each step, the answer, the budget spent and where the record and runs are.

Usage: PYTHONPATH=src .venv/bin/python bench/optimize_embedded.py [--budget-runs 12] [--num-prompts 16]
       [--results DIR] [--simulate-first]
CPU-heavy (an engine start per configuration, ~1 min each here, and every run): run it alone.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path


def main() -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument("--budget-runs", type=int, default=12)
    p.add_argument("--num-prompts", type=int, default=16)
    p.add_argument("--results", type=Path, default=Path("results"))
    p.add_argument("--name", default="optimize-embedded")
    p.add_argument("--budget-minutes", type=float, default=None)
    p.add_argument("--random-output-len", type=int, default=64)
    p.add_argument("--port", type=int, default=8347, help="the engine's port (not 8000: a shared machine)")
    p.add_argument("--simulate-first", action="store_true")
    args = p.parse_args()
    workload = ["--dataset-name", "random", "--random-input-len", "128", "--random-output-len",
                str(args.random_output_len), "--num-prompts", str(args.num_prompts), "--max-concurrency", "2"]
    budget = ["--budget-runs", str(args.budget_runs), "--repeats", "2",
              *(["--budget-minutes", str(args.budget_minutes)] if args.budget_minutes else [])]
    argv = [sys.executable, "-m", "servelab.cli.main", "optimize", "--name", args.name, "--results",
            str(args.results), "--port", str(args.port), *workload, *budget,
            *(["--simulate-first"] if args.simulate_first else []), "--", "--max-num-seqs", "2"]
    print("$ " + " ".join(argv[2:]), flush=True)
    started = time.monotonic()
    code = subprocess.call(argv)
    path = args.results / args.name / "optimize.json"
    if not path.is_file():
        print(f"exit {code}: no record written ({path})")
        return code or 1
    record = json.loads(path.read_text(encoding="utf-8"))
    print(f"\nexit {code} after {(time.monotonic() - started) / 60:.1f} min")
    print(figures(record))
    print(f"record: {args.results / args.name / 'optimize.json'}")
    return code


def figures(record: dict) -> str:
    base, final, b = record["baseline"], record.get("final") or {}, record["budget"]
    if base is None:
        return f"no baseline (stopped because: {record['stopped_because']})"
    r = base["result"]
    lines = [f"baseline: {r['output_tok_s']:.1f} out tok/s, mean TTFT {r['mean_ttft_ms']:.0f} ms; "
             f"verdict {base['verdict']}"]
    lines += [f"step {s['n']}: [{s['verdict']}] {s['why']}" for s in record["steps"]]
    if final:
        lines.append(f"final: {final['output_tok_s']:.1f} out tok/s ({final['output_tok_s'] / r['output_tok_s']:.2f}× "
                     f"the baseline); {final['serve_command']}; client --max-concurrency "
                     f"{final['client']['max_concurrency']}")
    op = record.get("operating_point")
    if op and op.get("load") is not None:
        lines.append(f"operating point: concurrency {op['load']:g}, {op['output_tok_s']:.1f} out tok/s")
    lines.append(f"stopped because: {record['stopped_because']}; runs {b['runs_used']}/{b['runs_limit']}, "
                 f"engine starts {b['engine_starts']}, simulated runs {b['simulated_runs']}, "
                 f"{b['minutes_used']:.1f} min")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
