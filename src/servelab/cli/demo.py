"""``servelab demo`` — start the embedded engine, print its memory report,
benchmark it with ShareGPT, stop it, show the result."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=int, default=8000, help="engine port (default %(default)s)")
    p.add_argument("--num-prompts", type=int, default=32)
    p.add_argument("--max-concurrency", type=int, default=8)
    p.add_argument("--output-len", type=int, default=128, help="tokens generated per request")
    p.add_argument("--out-dir", type=Path, default=None, help="default: results/demo-<time>")


def run(args: argparse.Namespace) -> int:
    from servelab.cli.serve import format_engine
    from servelab.engines import Terminated, sigterm_as_interrupt
    from servelab.study.demo import DemoPlan, run_demo

    out = args.out_dir or Path("results") / time.strftime("demo-%Y%m%d-%H%M%S")
    plan = DemoPlan(out, args.port, args.num_prompts, args.max_concurrency, args.output_len)
    t0 = time.monotonic()
    with sigterm_as_interrupt():
        try:
            outcome, context = run_demo(plan, on_ready=lambda e: print(format_engine(e) + "\n", flush=True))
        except KeyboardInterrupt as exc:
            print(f"servelab: {'terminated' if isinstance(exc, Terminated) else 'interrupted'}; "
                  "engine stopped", file=sys.stderr)
            return 130
    print(closing(outcome, context, time.monotonic() - t0))
    return outcome.exit_code


def closing(outcome, context: dict, elapsed_s: float) -> str:
    s, mem = outcome.summary, context["engine"]["memory_report"]
    kv = f"{mem['kv_cache_tokens']:,} KV tokens" if mem.get("kv_cache_tokens") else "KV size unknown"
    conc = f", {mem['max_concurrency']:.2f}x requests of {mem['max_concurrency_tokens']:,} tokens" \
        if mem.get("max_concurrency") and mem.get("max_concurrency_tokens") else ""
    return (f"\ndemo done in {elapsed_s:.0f} s — engine stopped\n"
            f"  engine:  {context['engine']['kind']} serving {Path(context['engine']['model']).name}: {kv}{conc}\n"
            f"  bench:   {s.completed} requests ok, {s.failed} failed; {s.output_throughput:.1f} output tok/s; "
            f"mean TTFT {s.stats_ms['ttft'].mean:.0f} ms; mean TPOT {s.stats_ms['tpot'].mean:.1f} ms\n"
            f"  result:  {outcome.result_path}")
