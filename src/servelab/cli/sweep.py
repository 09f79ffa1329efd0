"""``servelab sweep``: a load ladder on one engine — where throughput stops growing
(the knee, the operating point) and, with ``--slo``, the most load that meets it.

    servelab sweep --dataset-name random --random-input-len 128 --random-output-len 64 --num-prompts 64
    servelab sweep --loads 1,4,16,64 --slo ttft:500,tpot:50 --dataset-name sharegpt --num-prompts 200
    servelab sweep --over rate --start 0.5 --stop 16 --max-concurrency 256 …
    servelab sweep --engine vllm --model Qwen/Qwen3-8B --stop 256 … -- --max-num-seqs 256
    servelab sweep --base-url http://gpu-box:8000 …

Every ``servelab bench`` flag sets the base workload (all but the swept one, which
the sweep sets per point); ``--model``/``--host``/``--port`` say where the engine
is; after ``--``: the engine's own flags. Rerunning the same command resumes:
points done before are kept (``results/<name>/``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from servelab.flags.bench_serve import add_bench_arguments

from servelab.config import ENGINE_KINDS
# Bench flags that say where the engine is: the engine's flags here, set per run.
WHERE_DESTS = ("base_url", "host", "port", "model")
SHOWN_DESTS = ("dataset_name",)  # written even at their default: a reader of the workload sees what it is


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bench_arguments(p, runs_owned=True)
    g = p.add_argument_group("sweep")
    add_load_arguments(g)
    g.add_argument("--start", type=float, default=1, help="first load of the geometric ladder (default %(default)s)")
    g.add_argument("--stop", type=float, default=64, help="last load (default %(default)s)")
    g.add_argument("--factor", type=float, default=2.0, help="ladder step factor (default %(default)s)")
    g.add_argument("--min-gain", type=float, default=5.0, metavar="PCT",
                   help="saturated when a step adds less throughput than this … (default %(default)s %%)")
    g.add_argument("--max-latency-growth", type=float, default=20.0, metavar="PCT",
                   help="… while latency grows more than this (default %(default)s %%)")
    g.add_argument("--latency-key", default="median_e2el", help="latency the knee watches (default %(default)s)")
    g.add_argument("--tolerance", type=float, default=10.0, metavar="PCT",
                   help="--slo: bisect until the bracket is this narrow (default %(default)s %%)")
    g.add_argument("--max-bisect", type=int, default=4, help="--slo: most bisection runs (default %(default)s)")
    g.add_argument("--no-plot", action="store_true", help="skip the PNG curves")
    add_study_arguments(p, "sweep")
    add_engine_arguments(p)


def add_load_arguments(g) -> None:
    g.add_argument("--over", choices=("concurrency", "rate"), default="concurrency",
                   help="the load varied: --max-concurrency or --request-rate (default %(default)s)")
    g.add_argument("--loads", default=None, metavar="L1,L2,…", help="the loads, instead of a geometric ladder")
    g.add_argument("--slo", default=None, metavar="ttft:MS,tpot:MS,e2el:MS",
                   help="p99 latency limits; a point meets them with no failed request")


def add_study_arguments(p: argparse.ArgumentParser, default_name: str) -> None:
    g = p.add_argument_group("results")
    g.add_argument("--name", default=default_name, help="results go to RESULTS/NAME (default %(default)s)")
    g.add_argument("--results", type=Path, default=Path("results"), help="results root (default %(default)s)")
    g.add_argument("--warmup", type=int, default=4, help="warm-up requests after each engine start (default %(default)s)")
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


def run(args: argparse.Namespace) -> int:
    from servelab.errors import InputError
    from servelab.sweep.ladder import run_sweep

    if args.simulate:  # each point would run in the simulator beside an engine started for nothing
        raise InputError("sweep --simulate is not supported: sweep the simulated engine with --engine sim "
                         "(its flags after --), or pre-rank knobs with tune --simulate")
    plan = sweep_plan(args)
    started = time.monotonic()
    outcome = interruptible(lambda: run_sweep(plan, say=sayer("sweep", plan.name)), "sweep")
    if isinstance(outcome, int):
        return outcome
    print(report(outcome, time.monotonic() - started))
    return 0


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


def sweep_plan(args: argparse.Namespace):
    from servelab.sweep.ladder import SweepPlan
    from servelab.search.slo import parse_slo

    check_percent(args, ("min_gain", "max_latency_growth", "tolerance"))
    return SweepPlan(
        name=args.name, engine=engine_entry(args), spec=workload_spec(args), ladder=tuple(ladder(args)),
        over=args.over, results=args.results, min_gain=args.min_gain / 100,
        max_latency_growth=args.max_latency_growth / 100, latency_key=args.latency_key,
        slo=parse_slo(args.slo) if args.slo else None, rel_tol=args.tolerance / 100,
        max_bisect=args.max_bisect, warmup=args.warmup, port=engine_port(args), plots=not args.no_plot,
        verbose=args.verbose)


def check_percent(args, names) -> None:
    from servelab.errors import InputError

    for name in names:
        if getattr(args, name) < 0:
            raise InputError(f"--{name.replace('_', '-')} must be >= 0 (percent)")


def ladder(args: argparse.Namespace) -> list[float]:
    from servelab.errors import InputError
    from servelab.search.knee import geometric_ladder

    integer = args.over == "concurrency"
    if args.loads:
        return sorted(set(parse_loads(args.loads)))
    if not (0 < args.start <= args.stop) or args.factor <= 1:
        raise InputError("--start must be > 0 and <= --stop, and --factor > 1")
    return geometric_ladder(args.start, args.stop, args.factor, integer=integer)


def parse_loads(text: str) -> list[float]:
    from servelab.errors import InputError

    try:
        loads = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--loads: expected numbers like 1,2,4,8, got {text!r}") from None
    if not loads:
        raise InputError("--loads: give at least one load")
    return loads


def report(outcome, elapsed_s: float) -> str:
    from servelab.results.layout import SWEEP_FILE
    from servelab.sweep.ladder import table, verdict_lines

    plan = outcome.plan
    lines = ["", *simulated_line(plan.engine), table(outcome), "", *verdict_lines(outcome), ""]
    lines += [f"plot: {p}" for p in outcome.plots]
    lines += [f"summary: {plan.folder / SWEEP_FILE}", f"sweep done in {elapsed_s:.0f} s"]
    return "\n".join(lines)


def simulated_line(engine) -> list[str]:
    """A sweep or tuning run on the ``sim`` engine says so above its numbers."""
    if engine.spec.kind != "sim":
        return []
    return ["SIMULATED: engine 'sim' is servelab's vLLM V1 scheduler model; these numbers are not measured", ""]


# --- shared with `servelab tune`: the engine, and the base workload's bench flags ---

def engine_entry(args: argparse.Namespace, name: str | None = None):
    """The engine to sweep: embedded (default), an external URL, or one given like ``servelab serve``."""
    from servelab.errors import InputError
    from servelab.study.file import EngineEntry

    extra = args.engine_args[1:] if args.engine_args[:1] == ["--"] else list(args.engine_args)
    env = dict(_env(item) for item in args.env)
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
    from servelab.study.file import EngineEntry

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


def _env(item: str) -> tuple[str, str]:
    from servelab.errors import InputError

    key, sep, value = item.partition("=")
    if not sep or not key:
        raise InputError(f"--env {item!r}: expected KEY=VALUE")
    return key, value


def workload_spec(args: argparse.Namespace):
    """The base workload: parsed once, here; its identity is every bench flag given a
    non-default value, except where the engine is (each run sets that)."""
    from servelab.flags.bench_serve import bench_spec

    return bench_spec(args, tuple(workload_argv(args)))


def workload_argv(args: argparse.Namespace) -> list[str]:
    from servelab.errors import InputError
    from servelab.flags.bench_serve import RUN_OWNED_DESTS

    defaults, argv = _bench_defaults(), []
    for action in _bench_actions():
        value = getattr(args, action.dest)
        if action.dest in WHERE_DESTS or (value == defaults[action.dest] and action.dest not in SHOWN_DESTS):
            continue
        if action.dest in RUN_OWNED_DESTS:
            raise InputError(f"{action.option_strings[0]} is set by servelab for each run (results/<name>/…)")
        argv += _tokens(action, value)
    return argv


def _bench_defaults() -> dict:
    parser = argparse.ArgumentParser(add_help=False)
    add_bench_arguments(parser, runs_owned=True)
    return vars(parser.parse_args([]))


def _bench_actions():
    parser = argparse.ArgumentParser(add_help=False)
    add_bench_arguments(parser, runs_owned=True)
    return [a for a in parser._actions if a.option_strings]


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
