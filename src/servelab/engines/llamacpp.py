"""llama.cpp through ``xllamacpp``, which embeds llama-server as a Python object.

There is no server binary to exec, so the engine process is our own tiny entry
point (``python -m servelab.engines.llamacpp_main``) holding that object; to the
lifecycle it is a process like any other. Ready in ~2 s on a small GGUF.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from servelab.engines.ready import Probe
from servelab.engines.serve_line import paste
from servelab.engines.spec import EngineSpec
from servelab.errors import InputError


class LlamaCppEngine:
    stop_grace_s = 5.0
    listens_itself = True

    def resolve(self, spec: EngineSpec) -> EngineSpec:
        return spec

    def command(self, spec: EngineSpec) -> list[str]:
        model = Path(os.path.expanduser(spec.model))
        if not model.is_file():
            raise InputError(f"model path {spec.model} does not exist (llamacpp needs a .gguf file)")
        if importlib.util.find_spec("xllamacpp") is None:
            raise InputError("the llamacpp engine needs xllamacpp: pip install xllamacpp")
        entry = [sys.executable, "-m", "servelab.engines.llamacpp_main"]
        return [*entry, "--model", str(model), "--host", spec.host, "--port", str(spec.port), *spec.args]

    def environment(self, spec: EngineSpec) -> dict[str, str]:
        return {}

    def probes(self, spec: EngineSpec) -> list[Probe]:
        # llama-server answers /health with 503 while loading, 200 once the model is in.
        return [Probe(f"{spec.base_url}/health"), Probe(f"{spec.base_url}/v1/models")]

    def serve_command(self, spec: EngineSpec) -> str:
        return paste(self.command(spec), {**self.environment(spec), **spec.env})
