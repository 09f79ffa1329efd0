"""The seam between the lifecycle and each kind of engine.

A kind turns a spec into an argv, an environment and the probes that say it is
ready. Everything else — process group, log, watchdog, stop — is shared
(engine.py). ``ENGINES`` is a plain dict: grep it to see what can run.
"""

from __future__ import annotations

from typing import Protocol

from servelab.engines.embedded import EMBEDDED
from servelab.engines.llamacpp import LlamaCppEngine
from servelab.engines.ready import Probe
from servelab.engines.spec import EngineSpec
from servelab.engines.vllm import VllmEngine
from servelab.errors import InputError


class EngineKind(Protocol):
    # Seconds between SIGTERM and SIGKILL: vLLM drains and tears down its EngineCore.
    stop_grace_s: float

    def command(self, spec: EngineSpec) -> list[str] | None:
        """The argv to launch (InputError if the spec cannot run here); None: nothing to launch."""

    def environment(self, spec: EngineSpec) -> dict[str, str]:
        """Variables to add to the engine's environment (spec.env still wins)."""

    def probes(self, spec: EngineSpec) -> list[Probe]:
        """What must answer before the engine counts as ready."""


def openai_probes(base_url: str) -> list[Probe]:
    # /health is vLLM's and llama.cpp's; a server without it (404) is judged by /v1/models.
    return [Probe(f"{base_url}/health", optional=True), Probe(f"{base_url}/v1/models")]


class ExternalEngine:
    """A server someone else runs: nothing to launch or stop, but it must answer."""

    stop_grace_s = 0.0

    def command(self, spec: EngineSpec) -> None:
        return None

    def environment(self, spec: EngineSpec) -> dict[str, str]:
        return {}

    def probes(self, spec: EngineSpec) -> list[Probe]:
        return openai_probes(spec.base_url)


class CommandEngine:
    """Any command line that starts a server on spec.host:spec.port; ready when ready_url answers."""

    stop_grace_s = 10.0

    def command(self, spec: EngineSpec) -> list[str]:
        return [*spec.command, *spec.args]

    def environment(self, spec: EngineSpec) -> dict[str, str]:
        return {}

    def probes(self, spec: EngineSpec) -> list[Probe]:
        return [Probe(spec.ready_url)]


ENGINES: dict[str, EngineKind] = {
    "vllm": VllmEngine(),
    "llamacpp": LlamaCppEngine(),
    "external": ExternalEngine(),
    "command": CommandEngine(),
}

# What ``--engine`` offers: the embedded default first (a vllm spec with its own model,
# see embedded.py), then every kind. A new kind in ENGINES is a new choice.
ENGINE_CHOICES = (EMBEDDED, *ENGINES)


def kind_of(spec: EngineSpec) -> EngineKind:
    try:
        return ENGINES[spec.kind]
    except KeyError:
        raise InputError(f"unknown engine kind {spec.kind!r} (choose from {', '.join(ENGINES)})") from None
