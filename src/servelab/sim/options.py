"""The simulated engine's flags, one definition for two places, and the one way from flags
to the engine.

``servelab bench --simulate`` takes them prefixed (``--sim-max-num-seqs``), beside the
client's flags; the ``sim`` engine's server takes them under vLLM's own names
(``--max-num-seqs``), so a sweep or a tuning run varies a sim engine's knobs exactly as
it varies a real vLLM's. A bench spec keeps the ``--sim-*`` values given (``given``, in
``BenchSpec.sim_flags``) whether or not it simulates, so they are part of a run's identity;
a tuner builds each configuration's engine from them and its vLLM-named knobs with
``engine_from_flags`` — nothing parses a spec's argv again.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import fields
from pathlib import Path

from servelab.errors import InputError
from servelab.sim.model import EngineLimits, StepModel, blocks_for_tokens

_L, _M = EngineLimits(), StepModel()

# (name, type, default, help); the dest is the name with "-" → "_", prefixed "sim_".
LIMIT_FLAGS = (
    ("max-num-seqs", int, _L.max_num_seqs, "most requests running at once"),
    ("max-num-batched-tokens", int, _L.max_num_batched_tokens, "token budget of one step (chunked prefill)"),
    ("block-size", int, _L.block_size, "KV block size in tokens"),
    ("kv-cache-tokens", int, _L.kv_tokens, "KV cache size in tokens (rounded down to whole blocks)"),
)
STEP_FLAGS = (
    ("step-overhead-ms", _M.overhead_s * 1e3, "fixed cost of one engine step"),
    ("step-per-seq-ms", _M.per_seq_s * 1e3, "cost per request in a step"),
    ("step-per-token-ms", _M.per_token_s * 1e3, "cost per token computed in a step"),
    ("step-per-kv-token-us", _M.per_kv_token_s * 1e6, "cost per KV token attended over (microseconds)"),
    ("step-floor-ms", _M.floor_s * 1e3, "no step is shorter (the weight-read floor)"),
    ("step-request-ms", _M.request_s * 1e3, "the API server's cost per request before the engine sees it"),
    ("step-read-ms", _M.read_s * 1e3, "time to read the weights once per step, partly hidden by the token "
                                      "compute (see the overlap flag below)"),
    ("step-overlap", _M.overlap, "how the weight read and the compute overlap: (read^p + compute^p)^(1/p); "
                                 "1 adds them"),
)
# A mixture of experts (sim.model.StepModel's expert read): none of them for a dense model.
MOE_FLAGS = (
    ("step-expert-read-ms", float, _M.expert_read_s * 1e3, "MoE: time to read one routed expert in every MoE "
                                                          "layer; a step reads as many as its tokens pick"),
    ("step-expert-per-token-ms", float, _M.expert_token_s * 1e3, "MoE: the routed experts' compute per token, "
                                                                  "overlapping their read"),
    ("num-experts", int, _M.experts, "MoE: routed experts per layer (0: a dense model)"),
    ("num-experts-per-tok", int, _M.active_experts, "MoE: experts each token is routed to"),
)


def add_engine_arguments(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    g = parser.add_argument_group("simulated engine" + (f" (--{prefix}*)" if prefix else ""))
    for name, typ, default, text in LIMIT_FLAGS:
        g.add_argument(f"--{prefix}{name}", dest=dest(name), type=typ, default=default,
                       help=f"{text} (default %(default)s)")
    # One dest, two flags (vLLM's pair); the default is set on both, or store_false's True would win.
    g.add_argument(f"--{prefix}enable-prefix-caching", dest="sim_no_prefix_caching", action="store_false",
                   default=False, help="prefix cache on (the default, as in vLLM V1)")
    g.add_argument(f"--{prefix}no-enable-prefix-caching", dest="sim_no_prefix_caching", action="store_true",
                   default=False, help="prefix cache off")
    for name, default, text in STEP_FLAGS:
        g.add_argument(f"--{prefix}{name}", dest=dest(name), type=float, default=default,
                       help=f"{text} (default %(default)s)")
    for name, typ, default, text in MOE_FLAGS:
        g.add_argument(f"--{prefix}{name}", dest=dest(name), type=typ, default=default,
                       help=f"{text} (default %(default)s)")
    g.add_argument(f"--{prefix}step-model", dest="sim_step_model", default=None, metavar="JSON",
                   help="a step model file (a calibration's output: StepModel fields in seconds); "
                        "replaces the --step-* values")


def dest(name: str) -> str:
    """Where a parsed flag lands: ``max-num-seqs`` -> ``sim_max_num_seqs`` (either prefix)."""
    return "sim_" + name.replace("-", "_")


# Knobs the simulator models, in vLLM's names (a tuner's --knob, an optimizer's change); the
# rest (memory fraction, model length, a quantized model) change nothing it can see.
SIMULABLE = ("max-num-seqs", "max-num-batched-tokens", "block-size", "enable-prefix-caching", "kv-cache-tokens")
SWITCHES = ("enable-prefix-caching",)  # on and off as --NAME / --no-NAME, with no value


def knob(flag: str) -> str:
    """A vLLM flag's knob name: ``--no-enable-prefix-caching`` -> ``enable-prefix-caching``."""
    return flag.removeprefix("--").removeprefix("no-")


def simulable(flag: str) -> bool:
    """Whether the simulator models this vLLM flag (``--max-num-seqs``, ``--no-enable-prefix-caching``)."""
    name = knob(flag)
    return flag.startswith("--") and name in SIMULABLE and (name in SWITCHES or not flag.startswith("--no-"))


def given(args: argparse.Namespace) -> tuple[tuple[str, object], ...]:
    """The simulated engine's values given other than their defaults, as (dest, value) pairs
    in the flags' order (``--sim-*`` or vLLM-named: the dests are the same)."""
    defaults = vars(_parser().parse_args([]))
    return tuple((d, getattr(args, d)) for d, default in defaults.items() if getattr(args, d) != default)


def engine_from_flags(values: tuple[tuple[str, object], ...] = (), flags=(),
                      known_only: bool = False) -> tuple[EngineLimits, StepModel]:
    """The simulated engine: the defaults, then ``values`` (``given``'s pairs: a spec's
    ``sim_flags``), then ``flags`` in vLLM's names (an engine's args, a tuner's knobs; the last
    of a repeated flag wins). ``known_only``: flags it does not take are left out (a sim
    server's args say where it listens too); otherwise they, and a bad value, are an InputError."""
    parser, namespace = _parser(), argparse.Namespace(**dict(values))
    try:
        args, unknown = parser.parse_known_args([str(f) for f in flags], namespace=namespace)
    except argparse.ArgumentError as exc:
        raise InputError(f"simulated engine: {exc}") from None
    if unknown and not known_only:
        raise InputError(f"simulated engine: {' '.join(unknown)} is not a flag it takes")
    return from_args(args)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(add_help=False, exit_on_error=False, allow_abbrev=False)
    add_engine_arguments(parser)
    return parser


def from_args(args: argparse.Namespace) -> tuple[EngineLimits, StepModel]:
    """The frozen values behind the flags (InputError on a bad one)."""
    limits = EngineLimits(
        max_num_seqs=args.sim_max_num_seqs, max_num_batched_tokens=args.sim_max_num_batched_tokens,
        num_blocks=blocks_for_tokens(args.sim_kv_cache_tokens, args.sim_block_size),
        block_size=args.sim_block_size, enable_prefix_caching=not args.sim_no_prefix_caching)
    if getattr(args, "sim_step_model", None):
        return limits, load_step_model(args.sim_step_model)
    model = StepModel(overhead_s=args.sim_step_overhead_ms / 1e3, per_seq_s=args.sim_step_per_seq_ms / 1e3,
                      per_token_s=args.sim_step_per_token_ms / 1e3,
                      per_kv_token_s=args.sim_step_per_kv_token_us / 1e6, floor_s=args.sim_step_floor_ms / 1e3,
                      request_s=args.sim_step_request_ms / 1e3, read_s=args.sim_step_read_ms / 1e3,
                      overlap=args.sim_step_overlap, expert_read_s=args.sim_step_expert_read_ms / 1e3,
                      expert_token_s=args.sim_step_expert_per_token_ms / 1e3,
                      experts=args.sim_num_experts, active_experts=args.sim_num_experts_per_tok)
    return limits, model


def load_step_model(path: str) -> StepModel:
    """A JSON object of StepModel fields; its ``source`` defaults to the file's name."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise InputError(f"step model {path}: cannot read it ({exc})") from None
    known = {f.name for f in fields(StepModel)}
    if not isinstance(data, dict) or set(data) - known:
        bad = sorted(set(data) - known) if isinstance(data, dict) else "not an object"
        raise InputError(f"step model {path}: expected an object of {', '.join(sorted(known))}; got {bad}")
    try:
        return StepModel(**{"source": Path(path).name, **data})
    except TypeError as exc:
        raise InputError(f"step model {path}: {exc}") from None


def to_argv(limits: EngineLimits, model: StepModel) -> list[str]:
    """vLLM-named flags for the server (what the engine's args say it ran with)."""
    argv = ["--max-num-seqs", str(limits.max_num_seqs),
            "--max-num-batched-tokens", str(limits.max_num_batched_tokens),
            "--block-size", str(limits.block_size), "--kv-cache-tokens", str(limits.kv_tokens),
            "--step-overhead-ms", repr(model.overhead_s * 1e3), "--step-per-seq-ms", repr(model.per_seq_s * 1e3),
            "--step-per-token-ms", repr(model.per_token_s * 1e3),
            "--step-per-kv-token-us", repr(model.per_kv_token_s * 1e6), "--step-floor-ms", repr(model.floor_s * 1e3),
            "--step-request-ms", repr(model.request_s * 1e3), "--step-read-ms", repr(model.read_s * 1e3),
            "--step-overlap", repr(model.overlap)]
    if model.experts:
        argv += ["--step-expert-read-ms", repr(model.expert_read_s * 1e3),
                 "--step-expert-per-token-ms", repr(model.expert_token_s * 1e3), "--num-experts", str(model.experts),
                 "--num-experts-per-tok", str(model.active_experts)]
    return argv + ([] if limits.enable_prefix_caching else ["--no-enable-prefix-caching"])
