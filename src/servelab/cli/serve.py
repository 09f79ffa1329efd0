"""``servelab serve``: start an engine, print its memory report, serve until Ctrl-C/SIGTERM.

    servelab serve                                   # embedded: vLLM CPU + SmolLM2-135M
    servelab serve --engine vllm --model Qwen/Qwen3-8B -- --max-num-seqs 64
    servelab serve --engine llamacpp --model model.gguf -- --parallel 4
    servelab serve --engine command --ready-url http://127.0.0.1:9000/health -- ./my-server --port 9000
    servelab serve --engine external --url http://gpu-box:8000
    servelab serve --engine sim --model Qwen/Qwen3-8B --gpu A40 --quantization awq   # SIMULATED, planned

Top-level imports stay light so ``servelab --help`` is instant.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from servelab.config import ENGINE_KINDS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engine", choices=ENGINE_KINDS, default="embedded",
                        help="engine kind (default: %(default)s — vLLM's CPU build serving SmolLM2-135M)")
    parser.add_argument("--model", help="model path or id (vllm), GGUF file (llamacpp), label otherwise")
    parser.add_argument("--host", default="127.0.0.1", help="address the engine binds (default %(default)s)")
    parser.add_argument("--port", type=int, default=None,
                        help="port the engine listens on (default 8000; for --engine command, --ready-url's)")
    parser.add_argument("--url", help="external: the server's base URL")
    parser.add_argument("--ready-url", help="command: URL that answers 2xx once the server is ready")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                        help="extra environment for the engine (repeatable)")
    parser.add_argument("--ready-timeout", type=float, default=600.0, metavar="S",
                        help="seconds to wait for the engine to answer (default %(default)s)")
    parser.add_argument("--gpu", metavar="NAME[:COUNT]",
                        help="sim: plan the simulated engine for --model on this accelerator, as servelab plan "
                             "does (its KV cache, limits and step model; SIMULATED numbers)")
    parser.add_argument("--quantization", help="sim with --gpu: the weights' format, as servelab plan takes it")
    parser.add_argument("--log-dir", type=Path, help="where engine.log goes (default servelab-logs/serve-<time>)")
    parser.add_argument("engine_args", nargs=argparse.REMAINDER,
                        help="after --: extra engine flags (command: the command line itself)")


def run(args: argparse.Namespace) -> int:
    from servelab.engines import Terminated, sigterm_as_interrupt, start_engine

    log_dir = args.log_dir or Path("servelab-logs") / time.strftime("serve-%Y%m%d-%H%M%S")
    with sigterm_as_interrupt():
        planned = planned_sim(args, log_dir)
        spec = build_spec(args, planned[1] if planned else ())
        try:
            engine = start_engine(spec, log_dir)
        except KeyboardInterrupt as exc:
            what = "terminated" if isinstance(exc, Terminated) else "interrupted"
            print(f"servelab: {what} while starting; engine stopped", file=sys.stderr)
            return 143 if isinstance(exc, Terminated) else 130
        with engine:
            return _serve_until_stopped(engine, planned[0] if planned else None)


def planned_sim(args: argparse.Namespace, log_dir: Path):
    """``--engine sim --model M --gpu G``: (the plan's simulated engine, its server flags), the
    step model written to ``log_dir``; None without --gpu."""
    from servelab.errors import InputError

    if args.gpu is None:
        if args.quantization:
            raise InputError("--quantization goes with --gpu (--engine sim): for a real engine pass it after --")
        return None
    if args.engine != "sim":
        raise InputError(f"--gpu plans a simulated engine: use it with --engine sim, not {args.engine} "
                         "(a real engine runs on the GPU it has)")
    if not args.model:
        raise InputError("--engine sim --gpu needs --model: the model to plan, named as for servelab plan")
    from servelab.cli.sim_flags import server_flags, write_step_model
    from servelab.cli.sim_plan import PLAN_FLAGS, planned
    from servelab.engines.spec import flag_value

    extra = [str(a) for a in _strip_separator(args.engine_args)]
    given = {flag: flag_value(extra, flag) for flag in PLAN_FLAGS if flag_value(extra, flag) is not None}
    engine = planned(args.model, args.gpu, args.quantization, given)
    step_file = log_dir / "step_model.json"
    write_step_model(engine, step_file)
    return engine, server_flags(engine, step_file)


def build_spec(args: argparse.Namespace, planned_flags=()):
    from servelab.engines import EngineSpec
    from servelab.errors import InputError

    from servelab.engines.spec import DEFAULT_PORT, url_port
    from servelab.flags.dataset import key_values

    extra = _strip_separator(args.engine_args)
    env = key_values(args.env, "--env", strip=False)
    port = args.port if args.port is not None else \
        (args.engine == "command" and url_port(args.ready_url)) or DEFAULT_PORT
    if args.engine == "embedded":
        if args.model or args.url or args.ready_url:
            raise InputError("--model/--url/--ready-url need another --engine (the embedded engine has its own model)")
        return EngineSpec(name="embedded", kind="embedded", host=args.host, port=port, args=tuple(extra), env=env,
                          ready_timeout_s=args.ready_timeout)
    extra = [*planned_flags, *extra]  # flags after -- come last: the user's win over the plan's
    command = extra if args.engine == "command" else ()
    return EngineSpec(
        name=args.engine, kind=args.engine, model=args.model or "", host=args.host, port=port,
        args=() if args.engine == "command" else extra, env=env, ready_timeout_s=args.ready_timeout,
        url=args.url, command=command, ready_url=args.ready_url,
    )


def _strip_separator(extra: list[str]) -> list[str]:
    return extra[1:] if extra[:1] == ["--"] else extra


def _serve_until_stopped(engine, planned=None) -> int:
    from servelab.errors import EngineError

    try:  # from the first print on, a signal is the normal way to end serve
        print(format_engine(engine, predict(engine)), flush=True)
        if planned is not None:
            from servelab.cli.sim_plan import banner

            print("\n" + banner(planned), flush=True)
        print("serving; Ctrl-C to stop", file=sys.stderr, flush=True)
        while engine.alive():
            time.sleep(0.5)
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (Terminated)
        engine.stop()
        print("servelab: engine stopped", file=sys.stderr)
        return 0
    lines = "\n".join(f"  | {line}" for line in engine.last_log_lines(20))
    raise EngineError(f"engine {engine.spec.name!r} died while serving; last log lines:\n{lines}")


def predict(engine):
    """The planner's prediction for this engine, or None (an engine or model it cannot read)."""
    from servelab.errors import ServelabError
    from servelab.planner.predict import plan_for_engine

    try:
        return plan_for_engine(engine)
    except ServelabError:
        return None


def format_engine(engine, plan=None) -> str:
    """The block printed once the engine is ready: where it is, its memory report, and the
    planner's prediction beside it when there is one."""
    head = [
        ("engine", f"{engine.spec.name} ({engine.spec.kind})"),
        ("endpoint", f"{engine.base_url}/v1"),
        ("model", engine.model),
        ("pid", str(engine.pid) if engine.pid else "-"),
        ("log", str(engine.log_path)),
    ]
    if engine.ready_s is not None:
        head.append(("ready in", f"{engine.ready_s:.1f} s"))
    from servelab.reports.rows import aligned, memory_rows

    memory = memory_rows(engine.memory_report)
    predicted = predicted_rows(engine.memory_report, plan.report()) if plan else []
    width = max(len(label) for label, _ in head + memory + predicted)  # one column for all tables
    text = aligned(head, width) + "\n\nmemory report\n" + aligned(memory, width)
    if predicted:
        text += "\n\npredicted by servelab plan (error against the report)\n" + aligned(predicted, width)
    return text


# memory_rows label -> the MemoryReport field its error is taken on
_ERROR_FIELD = {"weights": "weights_gib", "KV cache": "kv_cache_gib", "KV cache tokens": "kv_cache_tokens",
                "max concurrency": "max_concurrency", "KV blocks": "num_gpu_blocks", "slots": "slots"}


def predicted_rows(measured, predicted) -> list[tuple[str, str]]:
    """The prediction's rows, each with its error where the engine reported the same figure."""
    from servelab.planner.predict import compare
    from servelab.reports.rows import memory_rows

    errors = {c.field: c.error for c in compare(measured, predicted)}
    rows = []
    for label, value in memory_rows(predicted):
        if label == "load time":
            continue
        error = errors.get(_ERROR_FIELD.get(label, ""))
        rows.append((label, value + ("" if error is None else f"  ({_error(error)})")))
    return rows


def _error(error: float) -> str:
    return "exact" if error == 0 else f"{error:+.1%}"
