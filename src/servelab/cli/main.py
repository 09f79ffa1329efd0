"""``servelab`` entry point.

Each subcommand lives in its own module exposing ``add_arguments(parser)`` and
``run(args) -> int``. Modules are imported only when their command is chosen, so
``servelab --help`` stays instant; their top level imports nothing heavy.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# command -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "bench": ("servelab.cli.bench", "benchmark a server (drop-in for `vllm bench serve`)"),
    "data": ("servelab.cli.data", "inspect the requests a dataset produces"),
    "mock": ("servelab.cli.mock", "run a mock OpenAI-compatible server that records the truth"),
    "diagnose": ("servelab.cli.diagnose", "say what limits a saved run, with evidence, and what to try next"),
    "selftest": ("servelab.cli.selftest", "measure the client's own ceiling and error against the mock"),
    "serve": ("servelab.cli.serve", "start an engine, print its memory report, stop it on Ctrl-C"),
    "gpu": ("servelab.cli.gpu", "pre-flight check of the GPUs (or the CPU when there is none)"),
    "study": ("servelab.cli.study", "run engines × workloads × repeats from one TOML file (resumable)"),
    "compare": ("servelab.cli.compare", "compare runs, folders or a study against a baseline, with noise"),
    "report": ("servelab.cli.report", "write a study's self-contained HTML (and Markdown) report"),
    "sweep": ("servelab.cli.sweep", "a load ladder on one engine: the knee, operating point, most load under an SLO"),
    "tune": ("servelab.cli.tune", "search engine knobs for the most throughput under an SLO; print the serve command"),
    "scale": ("servelab.cli.scale", "N replicas loaded at one instant: throughput in their common window, scaling efficiency"),
    "optimize": ("servelab.cli.optimize", "diagnose, change what limits it, keep only gains beyond noise, repeat; the serve line"),
    "plan": ("servelab.cli.plan", "predict weights, KV cache, requests at once and a speed floor, before launching"),
    "results": ("servelab.cli.results", "results recover DIR: a run killed hard, as a result from its records"),
    "demo": ("servelab.cli.demo", "the whole loop on the embedded engine: study, comparison, report"),
}


# A usage block longer than this many lines is replaced by a short one (bench's full usage is
# ~107 lines of every flag before the first word of help; the flags are listed below it anyway).
USAGE_LINES = 8


class Parser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line naming it (not a screen of usage), exit 2; a flag
    is never matched by a prefix (``--gpu`` is not ``--gpu-hour-cost``); a long usage is short."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def format_usage(self) -> str:
        self._shorten_usage()
        return super().format_usage()

    def _shorten_usage(self) -> None:
        """``PROG [OPTIONS] POSITIONALS`` when argparse's own usage runs past USAGE_LINES."""
        if self.usage is not None:
            return
        f = self._get_formatter()
        f.add_usage(None, self._actions, self._mutually_exclusive_groups)
        if f.format_help().count("\n") > USAGE_LINES:
            shown = [a for a in self._get_positional_actions() if a.help != argparse.SUPPRESS]
            self.usage = " ".join([self.prog, "[OPTIONS]", *(self._get_formatter()._metavar_formatter(
                a, a.dest)(1)[0] for a in shown)])

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def format_help(self) -> str:
        """A command that takes bench's workload flags (sweep, tune, scale) shows its own options
        first: its group carries its name, and what came before that group is bench's, shown
        last under one heading (~400 lines a reader looking for --loads scrolls past otherwise)."""
        name = self.prog.split()[-1]
        groups = self._action_groups[2:]  # [0], [1]: argparse's positionals and "options"
        first = next((i for i, g in enumerate(groups) if g.title == name), None)
        if not first:
            self._shorten_usage()
            return super().format_help()
        f = self._get_formatter()
        f.add_usage(f"{self.prog} [{name.upper()} OPTIONS] [BENCH WORKLOAD FLAGS] [-- ENGINE ARGS]", None, [])
        f.add_text(self.description)
        for group in [*groups[first:], self._action_groups[1]]:
            _section(f, group.title, group._group_actions, group.description)
        f.add_text(f"bench workload flags — `servelab bench`'s (vLLM's `vllm bench serve` flags), the same "
                   f"for every run of this {name}:")
        for group in groups[:first]:
            _section(f, group.title, group._group_actions)
        return f.format_help()


def _section(formatter, title: str, actions, description: str | None = None) -> None:
    formatter.start_section(title)
    formatter.add_text(description)  # a group's own description (argparse shows it; None adds nothing)
    formatter.add_arguments(actions)
    formatter.end_section()


def _top_parser() -> argparse.ArgumentParser:
    from servelab import __version__

    parser = Parser(prog="servelab", description="Measure, explain and tune LLM serving.")
    parser.add_argument("--version", action="version", version=f"servelab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    from servelab.telemetry.machine import mark_root

    mark_root()  # what this command starts counts as servelab's own CPU time (telemetry/machine.py)
    if not argv or argv[0] not in COMMANDS:
        _top_parser().parse_args(argv or ["--help"])
        return 2
    name, rest = argv[0], argv[1:]
    module = importlib.import_module(COMMANDS[name][0])
    parser = Parser(prog=f"servelab {name}", description=COMMANDS[name][1])
    module.add_arguments(parser)
    args = parser.parse_args(rest)
    return _run(module, args)


def _run(module, args) -> int:
    from servelab.errors import ServelabError

    try:
        return int(module.run(args) or 0)
    except ServelabError as exc:
        print(f"servelab: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM turned into Terminated
        terminated = type(exc).__name__ == "Terminated"
        print(f"servelab: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
        return 143 if terminated else 130
    except BrokenPipeError:  # `servelab gpu | head`: the reader left; not an error
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
