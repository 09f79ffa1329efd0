"""One configuration the optimizer measures, and how a change from the knob table moves it.

A configuration is the engine's flags and environment *and* the client's free variables
(``--max-concurrency``, ``--workers``): the load a deployment serves is part of the
answer, so it is varied beside the engine and reported beside it, never hidden in it.
Flags are kept as the argv the engine is started with; a change replaces the flag's
value (or appends it), so the serve command shows exactly what was measured.

A model change (``--alternative-model``) serves another checkpoint instead of the base
model: ``model`` is None for the base, else the checkpoint as the engine takes it. The
simulated engine runs no weights: what a checkpoint changes there is its step costs, so
its "model" is a ``--step-model`` file (``served_args``) — a stand-in, and the docs say so.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import NamedTuple

from servelab.diagnose.changes import CLIENT, ENV, FLAG, MODEL, Change
from servelab.engines.spec import flag_value
from servelab.planner.vllm_defaults import ASSUMED, batch_defaults


@dataclass(frozen=True, slots=True)
class Config:
    engine_args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    max_concurrency: int | None = None
    workers: int | None = None
    model: str | None = None  # another checkpoint served instead of the base model (None: the base)

    def to_dict(self) -> dict:
        out = {"engine_args": list(self.engine_args), "env": dict(self.env),
               "client": {"max_concurrency": self.max_concurrency, "workers": self.workers}}
        return {**out, "model": self.model} if self.model is not None else out  # only after a model change

    @staticmethod
    def from_dict(d: dict) -> Config:
        client = d.get("client") or {}
        return Config(tuple(d.get("engine_args") or ()), dict(d.get("env") or {}), client.get("max_concurrency"),
                      client.get("workers"), d.get("model"))


def served_args(config: Config, kind: str) -> tuple[str, ...]:
    """The engine's flags as started: the simulated engine takes its "model" as step costs
    (``--step-model FILE``); every other engine takes the model beside its flags."""
    if config.model is not None and kind == "sim":
        return set_flag(config.engine_args, "--step-model", config.model)
    return config.engine_args


@dataclass(frozen=True, slots=True)
class Move:
    """One change, with the values it moves between (``from`` None: not set, the engine's default)."""

    change: Change
    old: str | None
    new: str
    source: str | None = None  # where ``old`` was read (SOURCES); None: not recorded (a pre-ranked value)

    def to_dict(self) -> dict:
        out = {"kind": self.change.kind, "name": self.change.name, "from": self.old, "to": self.new}
        out |= {"from_source": self.source} if self.source else {}
        return {**out, "also": list(self.change.also)} if self.change.also else out  # doubled with it

    @property
    def label(self) -> str:
        if self.change.kind == MODEL:
            return f"model {self.old} → {self.new} (engine restarted; the workload's tokenizer kept)"
        also = "".join(f" (and {flag} with it)" for flag in self.change.also)
        said = f" ({self.source})" if self.source else ""
        return f"{self.change.said_as} {self.old or 'default'}{said} → {self.new}{also}"


# Where a knob's current value was read, first found wins: what the user set (the engine's flags or
# environment, a command engine's own command line, the client's flags), what a kept step set, what the
# engine reported as the value it ran with (the diagnosis' evidence: its flags, its startup log's memory
# report, its metrics), and only then the engine's default — a guess, and said as one.
GIVEN, COMMAND_LINE, CLIENT_FLAGS, KEPT, METRICS, REPORTED, DEFAULT = (
    "engine args", "command line", "client flags", "set by a kept step", "engine metrics (cache_config_info)",
    "diagnosis evidence", "engine default, not observed")
# Flags whose value vLLM reports in its own metrics: a label of ``vllm:cache_config_info`` (kept in the
# run's telemetry header). A default here is version-dependent (--gpu-memory-utilization 0.9 → 0.92),
# so the engine's word beats the table's.
REPORTED_FLAGS = {"--gpu-memory-utilization": "gpu_memory_utilization", "--kv-cache-dtype": "cache_dtype"}


class Known(NamedTuple):
    """A knob's value and where it was read (one of the sources above)."""

    value: str | None
    source: str


def current(config: Config, change: Change, evidence: dict) -> str | None:
    """The value the configuration runs with (``known``'s value, with no record of the base)."""
    return known(config, change, evidence).value


def known(config: Config, change: Change, evidence: dict, base: Config | None = None,
          from_command: frozenset[str] = frozenset(), reported: dict[str, str] | None = None,
          defaults: dict[str, Known] | None = None) -> Known:
    """The value the configuration runs with and where it was read: as set — by the user where the
    base configuration (``base``) sets the same value (``from_command``: the flags a command engine's
    own command line set), else by a kept step — then as the engine reported it (``reported``: its
    metrics, by flag; the verdict's evidence), then its default: the engine's on its device where
    known (``defaults``: ``engine_defaults``), else the knob table's."""
    if change.kind == MODEL:
        return Known(config.model, GIVEN)  # None: the base model (the loop names it)
    given = set_value(config, change)
    if given is not None:
        if base is not None and set_value(base, change) != given:
            return Known(given, KEPT)
        user = COMMAND_LINE if change.name in from_command else CLIENT_FLAGS if change.kind == CLIENT else GIVEN
        return Known(given, user)
    if change.kind == FLAG and (reported or {}).get(change.name) is not None:
        return Known(str(reported[change.name]), METRICS)
    seen = evidence.get(change.evidence_key) if change.evidence_key else None
    if seen is not None:
        return Known(str(seen), REPORTED)
    return (defaults or {}).get(change.name) or Known(change.default, DEFAULT)


def engine_defaults(kind: str, device: tuple[str, float | None] | None) -> dict[str, Known]:
    """vLLM's batch defaults on the GPU it serves from, by flag: the knob table cites a GPU under
    70 GiB's (256 sequences), and an H100's engine runs 1024 — stepping from the table's would set
    fewer than it had. {} for other kinds, or with no GPU seen."""
    if kind != "vllm" or device is None:
        return {}
    name, gib = device
    tokens, seqs = batch_defaults(name, gib)
    where = (f"vLLM {ASSUMED}'s default on {name} ({gib or 0:.0f} GiB), not observed")
    return {"--max-num-seqs": Known(str(seqs), where), "--max-num-batched-tokens": Known(str(tokens), where)}


def set_value(config: Config, change: Change) -> str | None:
    """The change's value as the configuration sets it (its flags, environment or client), None if unset."""
    if change.kind == FLAG:
        return flag_value(list(config.engine_args), change.name)
    if change.kind == ENV:
        return config.env.get(change.name)
    value = getattr(config, change.name)
    return None if value is None else str(value)


def next_value(change: Change, value: str | None) -> str | None:
    """The schedule's next value; None past the ceiling (or when it cannot move)."""
    how, _, arg = change.step.partition(":")
    if how == "set":
        return None if value == arg else arg
    try:
        x = float(value) if value is not None else None
    except ValueError:
        return None
    if x is None:
        return None
    new = x * 2 if how == "double" else x + float(arg)
    if change.ceiling is not None and new > change.ceiling + 1e-9:
        return None
    return str(int(new)) if new == int(new) and how == "double" else f"{new:g}"


def apply(config: Config, move: Move, evidence: dict | None = None) -> Config:
    """The configuration with the change made, and its companion flags doubled with it
    (their value as given, else as the verdict's evidence states it)."""
    c = move.change
    if c.kind == MODEL:
        return dataclasses.replace(config, model=move.new)
    if c.kind == CLIENT:
        config = dataclasses.replace(config, **{c.name: int(float(move.new))})
    elif c.kind == ENV:
        config = dataclasses.replace(config, env={**config.env, c.name: move.new})
    else:
        config = dataclasses.replace(config, engine_args=set_flag(config.engine_args, c.name, move.new))
    args = config.engine_args
    for flag in c.also:
        old = flag_value(list(args), flag) or (evidence or {}).get(flag.lstrip("-").replace("-", "_"))
        if old is not None and str(old).isdigit():
            args = set_flag(args, flag, str(2 * int(old)))
    return dataclasses.replace(config, engine_args=args)


def set_flag(args: tuple[str, ...], flag: str, value: str) -> tuple[str, ...]:
    """``--flag value`` replaced where given (either spelling, ``--flag=value`` too), else appended."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a == flag:
            skip = True
        elif not a.startswith(flag + "="):
            out.append(a)
    return (*out, flag, value)
