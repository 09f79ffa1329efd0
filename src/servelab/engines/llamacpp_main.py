"""``python -m servelab.engines.llamacpp_main --model X.gguf --port N [...]``

Runs xllamacpp's embedded llama-server until SIGTERM/SIGINT. Flags keep
llama-server's names so its users need nothing new; an unknown flag is an
argparse error, which the lifecycle reports with the log's last lines.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="servelab.engines.llamacpp_main", allow_abbrev=False)
    parser.add_argument("--model", "-m", required=True, help="GGUF file")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--ctx-size", "-c", type=int, help="total KV cache tokens, shared by the slots")
    parser.add_argument("--parallel", "-np", type=int, help="slots = requests decoded at once")
    parser.add_argument("--threads", "-t", type=int)
    parser.add_argument("--batch-size", "-b", type=int)
    parser.add_argument("--ubatch-size", "-ub", type=int)
    parser.add_argument("--n-gpu-layers", "-ngl", type=int)
    parser.add_argument("--alias", "-a", help="model name clients send (default: the path)")
    parser.add_argument("--no-metrics", action="store_true", help="do not expose /metrics")
    # 4 (info) prints the lines servelab's memory report reads (model buffers, KV cache size);
    # llama-server's default 3 leaves only the slot count.
    parser.add_argument("--verbosity", "-lv", type=int, default=4)
    return parser.parse_args(argv)


def params(args: argparse.Namespace):
    import xllamacpp

    p = xllamacpp.CommonParams()
    p.model.path, p.hostnames, p.port = args.model, [args.host], args.port
    p.endpoint_metrics = not args.no_metrics  # servelab's telemetry reads llamacpp:* from it
    p.verbosity = args.verbosity
    for flag, attr in (("ctx_size", "n_ctx"), ("parallel", "n_parallel"), ("batch_size", "n_batch"),
                       ("ubatch_size", "n_ubatch"), ("n_gpu_layers", "n_gpu_layers")):
        if getattr(args, flag) is not None:
            setattr(p, attr, getattr(args, flag))
    if args.threads is not None:
        p.cpuparams.n_threads = p.cpuparams_batch.n_threads = args.threads
    if args.alias:
        p.model_alias = {args.alias}
    return p


def main(argv: list[str] | None = None) -> int:
    import xllamacpp

    args = parse(sys.argv[1:] if argv is None else argv)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: stop.set())
    server = xllamacpp.Server(params(args))  # listens from here, on its own threads
    print(f"llamacpp_main: serving {args.model} on {server.listening_address}", flush=True)
    while not stop.wait(1.0):
        pass
    del server  # its destructor stops the HTTP loop and frees the model
    return 0


if __name__ == "__main__":
    sys.exit(main())
