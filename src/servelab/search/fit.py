"""Will a config fit? Checks that can tell before launching an engine (which costs
30 s to minutes), from the model's own limits and the KV budget an earlier start reported.

Rules (each a reason to skip, or None: launch it and see):
  - ``max-model-len`` above the model's ``max_position_embeddings``: vLLM refuses it.
  - chunked prefill off and ``max-num-batched-tokens`` < ``max-model-len``: vLLM
    refuses it (a whole prompt must fit in one step).
  - one request of ``max-model-len`` tokens must fit in the KV cache: the cache
    holds ``floor(tokens / block_size)`` blocks of ``block_size`` tokens. Its
    tokens are the reference start's, scaled when ``gpu-memory-utilization``
    changes and the device's size is known:
    ``kv_gib' = kv_gib + (u' − u) × device_gib`` (weights and activations do not
    move with u), ``tokens' = tokens × kv_gib' / kv_gib``.

A config's settings come from its flags as launched (``settings_of``), the model's own
limit from its local ``config.json`` (``model_max_len``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from servelab.engines import EngineSpec
from servelab.engines.spec import flag_value


@dataclass(frozen=True, slots=True)
class Budget:
    """The KV cache a reference start reported, and the utilization it was made under."""

    kv_cache_tokens: int
    kv_cache_gib: float | None = None
    gpu_memory_utilization: float | None = None  # None: not set (the engine's default)
    device_gib: float | None = None  # the accelerator's memory; None on CPU or when unknown
    model: str = ""
    kv_cache_dtype: str | None = None


@dataclass(frozen=True, slots=True)
class Settings:
    """One config's effective engine settings (None: not set, the engine's default)."""

    max_model_len: int | None = None
    model_max_len: int | None = None  # the model's max_position_embeddings, if readable
    block_size: int | None = None
    gpu_memory_utilization: float | None = None
    max_num_batched_tokens: int | None = None
    chunked_prefill: bool = True
    model: str = ""
    kv_cache_dtype: str | None = None

    @property
    def context(self) -> int | None:
        """Tokens of the longest request: max-model-len, else vLLM's default, the model's own."""
        return self.max_model_len or self.model_max_len


def misfit(s: Settings, budget: Budget | None) -> str | None:
    """Why the config cannot start, or None when no check can tell."""
    if s.max_model_len and s.model_max_len and s.max_model_len > s.model_max_len:
        return f"max-model-len {s.max_model_len} is above the model's {s.model_max_len}"
    if not s.chunked_prefill and s.max_num_batched_tokens and s.context and s.max_num_batched_tokens < s.context:
        return (f"chunked prefill off needs max-num-batched-tokens ≥ max-model-len "
                f"({s.max_num_batched_tokens} < {s.context})")
    comparable = budget and (budget.model, budget.kv_cache_dtype) == (s.model, s.kv_cache_dtype)
    return _kv_misfit(s, budget) if comparable else None


def kv_tokens(s: Settings, budget: Budget) -> float | None:
    """The KV tokens this config would get; None when utilization moved to where no KV is left."""
    u, ref = s.gpu_memory_utilization, budget.gpu_memory_utilization
    if u is None or ref is None or u == ref or not (budget.device_gib and budget.kv_cache_gib):
        return float(budget.kv_cache_tokens)
    gib = budget.kv_cache_gib + (u - ref) * budget.device_gib
    return budget.kv_cache_tokens * gib / budget.kv_cache_gib if gib > 0 else None


def _kv_misfit(s: Settings, budget: Budget) -> str | None:
    tokens = kv_tokens(s, budget)
    if tokens is None:
        return (f"gpu-memory-utilization {s.gpu_memory_utilization:g} leaves no KV cache "
                f"({budget.kv_cache_gib:g} GiB at {budget.gpu_memory_utilization:g})")
    block = s.block_size or 16
    usable = math.floor(tokens / block) * block
    if s.context and usable < s.context:
        return (f"one request of max-model-len {s.context} tokens needs {math.ceil(s.context / block)} "
                f"blocks of {block}; the KV cache holds ≈{usable // block} ({usable:,} tokens)")
    return None


def settings_of(spec: EngineSpec) -> Settings:
    """What a fit check needs, from the flags as launched (the last of a repeated flag wins)."""
    args = list(spec.args)
    chunked = _switch(args, "enable-chunked-prefill")
    return Settings(
        max_model_len=_int(flag_value(args, "--max-model-len")), model_max_len=model_max_len(spec.model),
        block_size=_int(flag_value(args, "--block-size")),
        gpu_memory_utilization=_float(flag_value(args, "--gpu-memory-utilization")),
        max_num_batched_tokens=_int(flag_value(args, "--max-num-batched-tokens")),
        chunked_prefill=True if chunked is None else chunked, model=spec.model,
        kv_cache_dtype=flag_value(args, "--kv-cache-dtype"))


def _switch(args: list[str], name: str) -> bool | None:
    found = [a for a in args if a in (f"--{name}", f"--no-{name}")]
    return None if not found else found[-1] == f"--{name}"


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def model_max_len(model: str) -> int | None:
    """The model's ``max_position_embeddings`` from its local config.json (None: not local)."""
    try:
        config = json.loads((Path(model).expanduser() / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = config.get("max_position_embeddings") or (config.get("text_config") or {}).get("max_position_embeddings")
    return value if isinstance(value, int) else None
