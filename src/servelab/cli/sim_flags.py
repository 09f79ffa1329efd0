"""The planned simulated engine as flags and a file: what ``serve --engine sim --gpu``
launches, what ``plan --sim-step-model`` prints and writes. Apart from ``cli/sim_plan.py``
(which makes the plan through ``cli/plan.py``) so that ``plan`` can use these without a
cycle between the two.
"""

from __future__ import annotations


def model_config(source) -> str:
    """Where the model's shape was read: its config.json or GGUF, or the bundled table."""
    if source.path is None:
        return "servelab model table (planner/models.py)"
    return str(source.path if source.path.suffix == ".gguf" else source.path / "config.json")


def server_flags(engine, step_file) -> list[str]:
    """The sim server's vLLM-named flags for ``engine``, its step model read from ``step_file``."""
    from pathlib import Path

    config = Path(engine.provenance["model_config"])  # a folder with a tokenizer counts prompts exactly
    tokenizer = ["--tokenizer", str(config.parent)] if (config.parent / "tokenizer.json").is_file() else []
    return [*tokenizer, *_limit_flags(engine, step_file, ""), "--max-model-len", str(engine.max_model_len)]


def bench_flags(engine, step_file) -> list[str]:
    """The same engine as ``bench --simulate``'s ``--sim-*`` flags."""
    return _limit_flags(engine, step_file, "sim-")


def _limit_flags(engine, step_file, prefix: str) -> list[str]:
    limits = engine.limits
    values = (("max-num-seqs", limits.max_num_seqs), ("max-num-batched-tokens", limits.max_num_batched_tokens),
              ("block-size", limits.block_size), ("kv-cache-tokens", limits.kv_tokens), ("step-model", step_file))
    return [part for name, value in values for part in (f"--{prefix}{name}", str(value))]


def write_step_model(engine, path) -> None:
    import json

    from servelab.errors import InputError

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(engine.model.to_dict(), indent=1), encoding="utf-8")
    except OSError as exc:
        raise InputError(f"step model {path}: cannot write it ({exc})") from None
