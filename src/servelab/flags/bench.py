"""``servelab bench`` flags: ``vllm bench serve``'s names, defaults and checks.

Light on purpose (argparse only at import): ``--help`` must stay instant.
"""

from __future__ import annotations

import argparse
import math

from servelab.flags.dataset import add_dataset_arguments

PERCENTILE_METRICS = ("ttft", "tpot", "itl", "e2el", "client_queue_time", "e2el_including_client_queue")
SLO_NAMES = ("ttft", "tpot", "e2el")


def add_bench_arguments(p: argparse.ArgumentParser) -> None:
    add_dataset_arguments(p)
    p.add_argument("--label", default=None, help="result label (default: the backend)")
    p.add_argument("--backend", default="openai", choices=["vllm", "openai", "openai-chat"])
    p.add_argument("--base-url", default=None, help="server base URL, instead of --host/--port")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--endpoint", default=None, help="API path (default by backend)")
    p.add_argument("--header", metavar="KEY=VALUE", nargs="*", help="extra request headers")
    p.add_argument("--max-concurrency", type=int, default=None)
    p.add_argument("--model", default=None, help="model name (default: the server's first model)")
    p.add_argument("--served-model-name", default=None, help="name sent in requests (default: --model)")
    p.add_argument("--request-rate", type=float, default=float("inf"))
    p.add_argument("--burstiness", type=float, default=1.0)
    p.add_argument("--ignore-eos", action="store_true")
    p.add_argument("--disable-tqdm", action="store_true", help="no progress line")
    p.add_argument("--num-warmups", type=int, default=0)
    p.add_argument("--save-result", action="store_true")
    p.add_argument("--save-detailed", action="store_true")
    p.add_argument("--append-result", action="store_true")
    p.add_argument("--metadata", metavar="KEY=VALUE", nargs="*")
    p.add_argument("--result-dir", default=None)
    p.add_argument("--result-filename", default=None)
    p.add_argument("--percentile-metrics", default="ttft,tpot,itl")
    p.add_argument("--metric-percentiles", default="99")
    p.add_argument("--goodput", nargs="+", metavar="KEY:MS")
    p.add_argument("--ready-check-timeout-sec", type=int, default=0)
    p.add_argument("--insecure", action="store_true", help="skip TLS certificate checks")
    p.add_argument("--extra-body", default=None, help="JSON merged into every request body")
    p.add_argument("--no-telemetry", action="store_true",
                   help="do not sample the engine's /metrics, the GPU and the client during the run")
    p.add_argument("--telemetry-interval", type=float, default=0.25, metavar="SECONDS",
                   help="time between telemetry samples (default %(default)s)")
    p.add_argument("--simulate", action="store_true",
                   help="no server: run the requests through servelab's simulated vLLM scheduler "
                        "(the --sim-* flags) and label every number SIMULATED")
    from servelab.sim.options import add_engine_arguments

    add_engine_arguments(p, prefix="sim-")
    s = p.add_argument_group("sampling parameters")
    s.add_argument("--temperature", type=float, default=None)
    s.add_argument("--top-p", type=float, default=None)
    s.add_argument("--top-k", type=int, default=None)
    s.add_argument("--min-p", type=float, default=None)


def key_values(items: list[str] | None, flag: str) -> dict[str, str]:
    from servelab.errors import InputError

    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"{flag}: expected KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def parse_goodput(items: list[str] | None) -> dict[str, float]:
    from servelab.errors import InputError

    slo: dict[str, float] = {}
    for item in items or []:
        name, sep, value = item.partition(":")
        try:
            slo[name] = float(value)
        except ValueError:
            raise InputError(f"--goodput: expected KEY:MILLISECONDS, got {item!r}") from None
        if not sep or name not in SLO_NAMES:
            raise InputError(f"--goodput: unknown metric {name!r} (use {', '.join(SLO_NAMES)})")
        if slo[name] < 0:
            raise InputError(f"--goodput: {name} must be non-negative")
    return slo


def parse_percentiles(metrics: str, percentiles: str) -> tuple[list[str], list[float]]:
    from servelab.errors import InputError

    names = [m.strip() for m in metrics.split(",") if m.strip()]
    bad = [m for m in names if m not in PERCENTILE_METRICS]
    if bad:
        raise InputError(f"--percentile-metrics: unknown {bad[0]!r} (use {', '.join(PERCENTILE_METRICS)})")
    try:
        pcts = [float(p) for p in percentiles.split(",")]
    except ValueError:
        raise InputError(f"--metric-percentiles: expected numbers like 50,90,99, got {percentiles!r}") from None
    if any(not 0 <= p <= 100 for p in pcts):
        raise InputError("--metric-percentiles: each must be within 0..100")
    return names, pcts


def check_load(args: argparse.Namespace) -> None:
    from servelab.errors import InputError

    if args.max_concurrency is not None and args.max_concurrency <= 0:
        raise InputError("--max-concurrency must be greater than 0")
    if not args.request_rate > 0 or math.isnan(args.request_rate):
        raise InputError("--request-rate must be positive (or inf)")
    if not args.burstiness > 0:
        raise InputError("--burstiness must be positive")
    if args.dataset_name in ("random", "prefix_repetition") and args.dataset_path:
        raise InputError(f"--dataset-path cannot be used with --dataset-name {args.dataset_name}")
    if args.num_warmups < 0:
        raise InputError("--num-warmups must be >= 0")
    if not getattr(args, "telemetry_interval", 1.0) > 0:
        raise InputError("--telemetry-interval must be positive")



def parse_bench_argv(argv: list[str], prog: str = "servelab bench") -> argparse.Namespace:
    """Parse bench flags given as a list (a study workload, the demo). Any
    argparse complaint becomes one InputError line instead of an exit."""
    from servelab.errors import InputError

    parser = argparse.ArgumentParser(prog=prog, add_help=False, exit_on_error=False)
    add_bench_arguments(parser)
    try:
        args, unknown = parser.parse_known_args(argv)
    except (argparse.ArgumentError, SystemExit) as exc:
        raise InputError(f"{prog}: {exc}") from None
    if unknown:
        raise InputError(f"{prog}: unknown flag {unknown[0]!r}")
    return args
