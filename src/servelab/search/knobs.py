"""Engine knobs to tune: ``--knob max-num-seqs=2,8,32 --knob enable-prefix-caching=on,off``.

Engine knowledge is data: ``KNOBS`` names the vLLM flags we know and the values
each takes. A switch becomes vLLM's flag pair (``--enable-prefix-caching`` /
``--no-enable-prefix-caching``). ``model`` is a quantization variant given as
another model path ("default": the engine's own model). Any other name is passed
to the engine as ``--NAME VALUE`` (a switch value as ``--NAME`` / ``--no-NAME``),
so a knob this table does not know still works — and a typo makes the engine
fail to start, which tune records as infeasible.
"""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass

from servelab.errors import InputError

# knob -> kind of value: "int" (> 0), "fraction" (0 < x ≤ 1), "switch" (on/off), "model" (a path)
KNOBS = {
    "max-num-seqs": "int",
    "max-num-batched-tokens": "int",
    "max-model-len": "int",
    "block-size": "int",
    "gpu-memory-utilization": "fraction",
    "enable-prefix-caching": "switch",
    "enable-chunked-prefill": "switch",
    "model": "model",
}
ALIASES = {"prefix-caching": "enable-prefix-caching", "chunked-prefill": "enable-chunked-prefill",
           "quantization-variant": "model"}
SWITCH = {"on": True, "off": False, "true": True, "false": False, "yes": True, "no": False}
DEFAULT_MODEL = "default"  # the model value that keeps the engine's own model
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")


@dataclass(frozen=True, slots=True)
class Knob:
    name: str
    values: tuple[str, ...]


def parse_knob(text: str) -> Knob:
    """``NAME=V1,V2,…`` -> Knob; InputError naming what is wrong."""
    name, sep, rest = text.partition("=")
    name = ALIASES.get(name.strip().lstrip("-"), name.strip().lstrip("-"))
    values = tuple(v.strip() for v in rest.split(",") if v.strip()) if sep else ()
    if not _NAME.match(name) or not values:
        raise InputError(f"--knob {text!r}: expected NAME=V1,V2 (e.g. max-num-seqs=8,32)")
    if len(set(values)) != len(values):
        raise InputError(f"--knob {name}: a value is repeated")
    for value in values:
        _check_value(name, value)
    return Knob(name, values)


def _check_value(name: str, value: str) -> None:
    kind = KNOBS.get(name)
    try:
        ok = {"int": lambda: int(value) > 0, "fraction": lambda: 0 < float(value) <= 1,
              "switch": lambda: value.lower() in SWITCH, "model": lambda: True}[kind]() if kind else True
    except ValueError:
        ok = False
    if not ok:
        what = {"int": "a whole number > 0", "fraction": "a number in (0, 1]", "switch": "on or off"}[kind]
        raise InputError(f"--knob {name}: {value!r} is not {what}")


def configs(knobs: list[Knob]) -> list[dict[str, str]]:
    """Every combination, the first knob varying slowest; InputError on a knob given twice."""
    names = [k.name for k in knobs]
    if len(set(names)) != len(names):
        raise InputError(f"--knob {next(n for n in names if names.count(n) > 1)} is given twice")
    return [dict(zip(names, combo)) for combo in itertools.product(*(k.values for k in knobs))]


def config_name(choice: dict[str, str]) -> str:
    """A folder-safe name: ``max-num-seqs=8,enable-prefix-caching=off`` (a model by its folder name)."""
    parts = []
    for name, value in choice.items():
        shown = os.path.basename(value.rstrip("/\\")) if KNOBS.get(name) == "model" else value
        parts.append(f"{name}={re.sub(r'[^A-Za-z0-9._+=-]', '_', shown)}")
    return ",".join(parts) or "base"


def knob_flags(choice: dict[str, str]) -> list[str]:
    """The engine flags for one combination (``model`` is not a flag: see ``model_of``)."""
    out: list[str] = []
    for name, value in choice.items():
        if KNOBS.get(name) == "model":
            continue
        switch = SWITCH.get(value.lower()) if KNOBS.get(name, "switch") == "switch" else None
        out += [f"--{name}" if switch else f"--no-{name}"] if switch is not None else [f"--{name}", value]
    return out


def model_of(choice: dict[str, str]) -> str | None:
    """The model path this combination serves instead of the engine's own; None keeps it."""
    value = choice.get("model")
    return None if value in (None, DEFAULT_MODEL) else value
