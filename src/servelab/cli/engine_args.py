"""What ``servelab sweep``, ``tune`` and ``scale`` share on their command line: one engine
given like ``servelab serve`` (its ``--model/--host/--port`` are bench's flags, read as
the engine's), the base workload as bench flags, where results go, and how a run that
is cut short says how to resume.

Parsed here, once, into values (an ``EngineEntry``, a ``BenchSpec``); the commands pass
those on, never the ``Namespace``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from servelab.config import ENGINE_KINDS

# Bench flags that say where the engine is: the engine's flags here, set per run.
WHERE_DESTS = ("base_url", "host", "port", "model")
SHOWN_DESTS = ("dataset_name",)  # in the shown flags even at their default: a reader sees what the workload is


# --loads: a sweep walks a geometric ladder without it; a tune has no ladder, only the workload's own load.
LOADS_HELP = {"sweep": "the loads, instead of a geometric ladder",
              "tune": "the loads each config is measured at (default: the one load the workload's "
                      "--max-concurrency or --request-rate gives)"}


def add_load_arguments(g, command: str = "sweep") -> None:
    g.add_argument("--over", choices=("concurrency", "rate"), default="concurrency",
                   help="the load varied: --max-concurrency or --request-rate (default %(default)s)")
    g.add_argument("--loads", default=None, metavar="L1,L2,…", help=LOADS_HELP[command])
    g.add_argument("--slo", default=None, metavar="ttft:MS,tpot:MS,e2el:MS",
                   help="p99 latency limits; a point meets them with no failed request")


def add_study_arguments(p: argparse.ArgumentParser, default_name: str) -> None:
    g = p.add_argument_group("results")  # the only one: bench's own is "reported metrics" here (runs_owned)
    g.add_argument("--name", default=default_name, help="results go to RESULTS/NAME (default %(default)s)")
    g.add_argument("--results", type=Path, default=Path("results"), help="results root (default %(default)s)")
    g.add_argument("--warmup", type=int, default=4,
                   help="warm-up requests after each engine start (default %(default)s)")
    g.add_argument("--verbose", action="store_true", help="show each run's full console block")


def add_engine_arguments(p: argparse.ArgumentParser) -> None:
    """As ``servelab serve`` (its --model/--host/--port are bench's, read as the engine's)."""
    g = p.add_argument_group("engine (default: the embedded vLLM CPU engine)")
    g.add_argument("--engine", choices=ENGINE_KINDS, default="embedded",
                   help="engine kind (default: %(default)s); or --base-url of a running server")
    g.add_argument("--url", help="external: the server's base URL (same as --base-url)")
    g.add_argument("--ready-url", help="command: URL that answers 2xx once the server is ready")
    g.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="engine environment (repeatable)")
    g.add_argument("--ready-timeout", type=float, default=600.0, metavar="S",
                   help="seconds to wait for the engine (default %(default)s)")
    g.add_argument("engine_args", nargs=argparse.REMAINDER,
                   help="after --: extra engine flags (command: the command line itself)")
    p.set_defaults(port=None)  # see engine_port


def engine_port(args: argparse.Namespace) -> int:
    """--port; else a command engine's --ready-url port (where it listens); else DEFAULT_PORT."""
    from servelab.engines.spec import DEFAULT_PORT, url_port

    if args.port is not None:
        return args.port
    return (args.engine == "command" and url_port(args.ready_url)) or DEFAULT_PORT


def parse_loads(text: str) -> list[float]:
    from servelab.errors import InputError

    try:
        loads = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--loads: expected numbers like 1,2,4,8, got {text!r}") from None
    if not loads:
        raise InputError("--loads: give at least one load")
    return loads


def sayer(what: str, name: str):
    return lambda text: print(f"[{what} {name}] {text}", flush=True)


def interruptible(work, what: str):
    """Run ``work`` with SIGTERM as Ctrl-C (engines stop either way); an int exit code if cut."""
    from servelab.engines import Terminated, sigterm_as_interrupt

    with sigterm_as_interrupt():
        try:
            return work()
        except KeyboardInterrupt as exc:
            stopped = "terminated" if isinstance(exc, Terminated) else "interrupted"
            print(f"servelab: {stopped}; engine stopped. Completed runs are kept: rerun the same "
                  f"command to resume the {what}.", file=sys.stderr)
            return 143 if isinstance(exc, Terminated) else 130


def simulated_line(engine) -> list[str]:
    """A sweep or tuning run on the ``sim`` engine says so above its numbers."""
    if engine.spec.kind != "sim":
        return []
    return ["SIMULATED: engine 'sim' is servelab's vLLM V1 scheduler model; these numbers are not measured", ""]


# --- the engine ---

def engine_entry(args: argparse.Namespace, name: str | None = None):
    """The engine: embedded (default), an external URL, or one given like ``servelab serve``."""
    from servelab.errors import InputError
    from servelab.flags.dataset import key_values
    from servelab.study.entries import EngineEntry

    extra = args.engine_args[1:] if args.engine_args[:1] == ["--"] else list(args.engine_args)
    env = key_values(args.env, "--env", strip=False)
    url = args.base_url or args.url
    if url or args.engine == "external":
        return _external(args, url, name)
    if args.engine == "embedded" and (args.model or args.ready_url):
        raise InputError("--model/--ready-url need another --engine (the embedded engine has its own model)")
    spec = _spec(args, extra, env, name or args.engine)
    return EngineEntry(name=spec.name, spec=spec, args=spec.args, env=env, port=spec.port,
                       ready_timeout_s=args.ready_timeout)


def _external(args, url: str | None, name: str | None):
    from servelab.engines import EngineSpec
    from servelab.errors import InputError
    from servelab.study.entries import EngineEntry

    if not url:
        raise InputError("--engine external needs --url (or --base-url)")
    if args.engine_args:
        raise InputError("an external server takes no engine flags (it is already running)")
    spec = EngineSpec(name=name or "external", kind="external", model=args.model or "", url=url,
                      ready_timeout_s=args.ready_timeout)
    return EngineEntry(name=spec.name, spec=spec, ready_timeout_s=args.ready_timeout,
                       reset_prefix_cache=True)


def _spec(args, extra: list[str], env: dict, name: str):
    from servelab.engines import EngineSpec

    command = tuple(extra) if args.engine == "command" else ()
    return EngineSpec(name=name, kind=args.engine, model=args.model or "", host=args.host, port=engine_port(args),
                      args=() if args.engine == "command" else tuple(extra), env=env,
                      ready_timeout_s=args.ready_timeout, command=command, ready_url=args.ready_url)


# --- the base workload ---

def workload_spec(args: argparse.Namespace):
    """The base workload: parsed once, here. Its ``argv`` is provenance only (shown, never
    hashed: a run's identity is the spec itself): every bench flag given a value other
    than its default, except where the engine is (each run sets that)."""
    from servelab.flags.bench_serve import bench_spec

    return bench_spec(args, tuple(shown_flags(args)))


def shown_flags(args: argparse.Namespace) -> list[str]:
    from servelab.errors import InputError
    from servelab.flags.bench_serve import RUN_OWNED_DESTS
    from servelab.study.file import bench_actions

    defaults, argv = _bench_defaults(), []
    for action in bench_actions(runs_owned=True):
        value = getattr(args, action.dest)
        if action.dest in WHERE_DESTS or (value == defaults[action.dest] and action.dest not in SHOWN_DESTS):
            continue
        if action.dest in RUN_OWNED_DESTS:
            raise InputError(f"{action.option_strings[0]} is set by servelab for each run (results/<name>/…)")
        argv += _tokens(action, value)
    return argv


def _bench_defaults() -> dict:
    from servelab.flags.bench_serve import add_bench_arguments

    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    add_bench_arguments(parser, runs_owned=True)
    return vars(parser.parse_args([]))


def _tokens(action, value) -> list[str]:
    import json

    flag = action.option_strings[0]
    if action.nargs == 0:  # store_true
        return [flag]
    if isinstance(value, list):
        return [flag, *map(str, value)]
    if isinstance(value, tuple):  # --random-range-ratio: (input, output or None)
        return [flag, str(value[0]) if value[1] is None else json.dumps({"input": value[0], "output": value[1]})]
    return [flag, str(value)]
