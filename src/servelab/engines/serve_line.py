"""A tuner's winner as the one line a user pastes to serve it: the command each engine kind
measured, without the host and port servelab chose, and with the environment it ran under
less what only the measurement needed. Each kind's ``serve_command`` builds it from these."""

from __future__ import annotations

import shlex

# vLLM's /reset_prefix_cache answers only with it: a study sets it to empty the prefix cache
# between runs, so it is part of the measurement, not of what to serve.
DEV_MODE = "VLLM_SERVER_DEV_MODE"
MEASUREMENT_ENV = (DEV_MODE,)


def paste(argv: list[str], env: dict[str, str]) -> str:
    """``K=V … argv`` as a shell line; ``env`` less the measurement's own variables."""
    kept = {k: v for k, v in env.items() if k not in MEASUREMENT_ENV}
    return "".join(f"{k}={shlex.quote(v)} " for k, v in sorted(kept.items())) + shlex.join(argv)


def flags_after_model(argv: list[str]) -> list[str]:
    """The engine's own flags: after ``--model M`` (the CPU build, the simulator) or ``serve M``
    (``vllm serve``), without ``--host`` and ``--port`` and their values."""
    start = next((argv.index(m) + 2 for m in ("--model", "serve") if m in argv), len(argv))
    out, skip = [], False
    for flag in argv[start:]:
        if skip:
            skip = False
        elif flag in ("--host", "--port"):
            skip = True
        else:
            out.append(flag)
    return out
