"""``servelab selftest`` — the client against the mock's recorded truth."""

from __future__ import annotations

import argparse
import json


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--concurrency", type=int, default=512, help="streams open at once (fidelity phase)")
    p.add_argument("--ttft-ms", type=float, default=50.0)
    p.add_argument("--itl-ms", type=float, default=10.0)
    p.add_argument("--output-len", type=int, default=100, help="tokens per request (fidelity phase)")
    p.add_argument("--num-prompts", type=int, default=None, help="requests (default: 4 × concurrency)")
    p.add_argument("--ceiling-streams", type=int, default=64)
    p.add_argument("--ceiling-tokens", type=int, default=1000)
    p.add_argument("--skip-ceiling", action="store_true")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")


def run(args: argparse.Namespace) -> int:
    from servelab.errors import InputError

    if args.concurrency < 1 or args.output_len < 1:
        raise InputError("--concurrency and --output-len must be >= 1")
    from servelab.selftest.run import run_selftest

    figures = run_selftest(args)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(render(figures))
    return 0


def _ms(v) -> str:
    return "-" if v is None else f"{v:+.3f}"


def _open(fid: dict) -> str:
    if fid["server_open_mean"] is None:  # see selftest.fidelity: no steady window to measure over
        return f"{'n/a':>24}  (all {fid['concurrency']} requests were sent at once: none to replace)"
    return f"{fid['server_open_mean']:>17.1f} / {fid['concurrency']}"


def render(f: dict) -> str:
    fid = f["fidelity"]
    rows = [
        f"servelab selftest — client on CPU {f['client_cpus']}, mock on CPU {f['mock_cpus']}",
        f"fidelity: {fid['concurrency']} streams, TTFT {f['ttft_ms']} ms, ITL {f['itl_ms']} ms, "
        f"{f['output_len']} tokens, {fid['matched']} requests matched to the truth",
        f"  {'':<28}{'error (client − truth)':>24}",
        f"  {'mean TTFT (ms)':<28}{fid['ttft_mean_err_ms']:>+24.3f}",
        f"  {'p99 TTFT (ms)':<28}{fid['ttft_p99_err_ms']:>+24.3f}",
        f"  {'mean ITL (ms)':<28}{fid['itl_mean_err_ms']:>+24.3f}",
        f"  {'p99 ITL (ms)':<28}{fid['itl_p99_err_ms']:>+24.3f}",
        f"  {'  of which request delivery':<28}{_ms(fid.get('request_delivery_mean_ms')):>24}",
        f"  {'  of which event delivery':<28}{_ms(fid.get('event_delivery_mean_ms')):>24}",
        f"  {'mock read delay (true wait)':<28}{_ms(fid.get('mock_read_delay_mean_ms')):>24}",
        f"  {'open at the server (mean)':<28}{_open(fid)}",
        f"  {'client CPU (one core)':<28}{f['fidelity_client_cpu']:>24.0%}",
    ]
    if f.get("ceiling"):
        c = f["ceiling"]
        rows.append(f"ceiling: {c['streams']} streams × {c['tokens']} tokens, no delay → "
                    f"{c['output_tok_s']:,.0f} output tok/s (client CPU {c['client_cpu']:.0%})")
    return "\n".join(rows)
