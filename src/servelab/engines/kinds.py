"""The seam between the lifecycle and each kind of engine.

A kind turns a spec into an argv, an environment and the probes that say it is
ready. Everything else — process group, log, watchdog, stop — is shared
(engine.py). ``ENGINES`` is a plain dict: grep it to see what can run.
"""

from __future__ import annotations

from typing import Protocol

from servelab.engines.embedded import as_vllm
from servelab.engines.llamacpp import LlamaCppEngine
from servelab.engines.ready import Probe
from servelab.engines.serve_line import paste
from servelab.engines.sim import SimEngine
from servelab.engines.spec import EngineSpec
from servelab.engines.vllm import VllmEngine
from servelab.errors import InputError


class EngineKind(Protocol):
    # Seconds between SIGTERM and SIGKILL: vLLM drains and tears down its EngineCore.
    stop_grace_s: float
    # True: the launched process group itself listens on spec.port, so the server that answered
    # the ready probe must be one of its processes. False: a command (``docker run``: docker's
    # proxy listens) or an external server.
    listens_itself: bool

    def resolve(self, spec: EngineSpec) -> EngineSpec:
        """The spec as launched (the embedded kind becomes the vLLM spec it runs); most: itself."""

    def command(self, spec: EngineSpec) -> list[str] | None:
        """The argv to launch (InputError if the spec cannot run here); None: nothing to launch."""

    def environment(self, spec: EngineSpec) -> dict[str, str]:
        """Variables to add to the engine's environment (spec.env still wins)."""

    def probes(self, spec: EngineSpec) -> list[Probe]:
        """What must answer before the engine counts as ready."""

    def serve_command(self, spec: EngineSpec) -> str:
        """How to serve a tuner's winner: the line a user pastes (engines/serve_line.py)."""


def openai_probes(base_url: str) -> list[Probe]:
    # /health is vLLM's and llama.cpp's; a server without it (404) is judged by /v1/models.
    return [Probe(f"{base_url}/health", optional=True), Probe(f"{base_url}/v1/models")]


class ExternalEngine:
    """A server someone else runs: nothing to launch or stop, but it must answer."""

    stop_grace_s = 0.0
    listens_itself = False

    def resolve(self, spec: EngineSpec) -> EngineSpec:
        return spec

    def command(self, spec: EngineSpec) -> None:
        return None

    def environment(self, spec: EngineSpec) -> dict[str, str]:
        return {}

    def probes(self, spec: EngineSpec) -> list[Probe]:
        return openai_probes(spec.base_url)

    def serve_command(self, spec: EngineSpec) -> str:
        return paste(self.command(spec) or [], {**self.environment(spec), **spec.env})


class CommandEngine:
    """Any command line that starts a server on spec.host:spec.port; ready when ready_url answers."""

    stop_grace_s = 10.0
    listens_itself = False

    def resolve(self, spec: EngineSpec) -> EngineSpec:
        return spec

    def command(self, spec: EngineSpec) -> list[str]:
        return [*spec.command, *spec.args]

    def environment(self, spec: EngineSpec) -> dict[str, str]:
        return {}

    def probes(self, spec: EngineSpec) -> list[Probe]:
        return [Probe(spec.ready_url)]

    def serve_command(self, spec: EngineSpec) -> str:
        return paste(self.command(spec) or [], {**self.environment(spec), **spec.env})


class EmbeddedEngine:
    """The offline default: vLLM's CPU build serving SmolLM2-135M-Instruct. Its model is
    converted on first use, so it is a vLLM spec only once resolved."""

    stop_grace_s = VllmEngine.stop_grace_s
    listens_itself = True

    def resolve(self, spec: EngineSpec) -> EngineSpec:
        return as_vllm(spec)

    def command(self, spec: EngineSpec) -> list[str]:
        return VllmEngine().command(self.resolve(spec))

    def environment(self, spec: EngineSpec) -> dict[str, str]:
        return VllmEngine().environment(self.resolve(spec))

    def probes(self, spec: EngineSpec) -> list[Probe]:
        return VllmEngine().probes(self.resolve(spec))

    def serve_command(self, spec: EngineSpec) -> str:  # its CPU build's command line, as launched
        return paste(self.command(spec), {**self.environment(spec), **spec.env})


ENGINES: dict[str, EngineKind] = {  # keys: spec.KINDS, in its order
    "embedded": EmbeddedEngine(),
    "vllm": VllmEngine(),
    "llamacpp": LlamaCppEngine(),
    "external": ExternalEngine(),
    "command": CommandEngine(),
    "sim": SimEngine(),  # simulated: servelab's vLLM V1 scheduler model, labelled so
}


def kind_of(spec: EngineSpec) -> EngineKind:
    try:
        return ENGINES[spec.kind]
    except KeyError:
        raise InputError(f"unknown engine kind {spec.kind!r} (choose from {', '.join(ENGINES)})") from None


def serve_command(spec: EngineSpec) -> str:
    """How to serve a tuner's winner, in its engine kind's words (engines/serve_line.py)."""
    return kind_of(spec).serve_command(spec)
