"""The ``sim`` engine kind: servelab's simulated vLLM (``sim_main.py``) as a process.

Launched, watched, scraped and stopped like any engine, so serve, studies, sweeps and
tuning run against it unchanged. Its flags keep vLLM's names (``--max-num-seqs``,
``--max-num-batched-tokens``, ``--block-size``) plus its own (``--kv-cache-tokens``,
``--step-*``); the model is only the served name.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from servelab.engines.ready import Probe
from servelab.engines.serve_line import flags_after_model
from servelab.engines.spec import EngineSpec


class SimEngine:
    stop_grace_s = 5.0
    listens_itself = True

    def resolve(self, spec: EngineSpec) -> EngineSpec:
        return spec

    def command(self, spec: EngineSpec) -> list[str]:
        return [sys.executable, "-m", "servelab.engines.sim_main", "--model", spec.model or "sim",
                "--host", spec.host, "--port", str(spec.port), *spec.args]

    def environment(self, spec: EngineSpec) -> dict[str, str]:
        # The child must run this very servelab, installed or not.
        src = str(Path(__file__).resolve().parents[2])
        rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != src]
        return {"PYTHONPATH": os.pathsep.join([src, *rest])}

    def probes(self, spec: EngineSpec) -> list[Probe]:
        return [Probe(f"{spec.base_url}/health"), Probe(f"{spec.base_url}/v1/models")]

    def serve_command(self, spec: EngineSpec) -> str:
        """Nothing to deploy, but the knobs to try on a real engine."""
        return ("servelab serve --engine sim -- " + shlex.join(flags_after_model(self.command(spec)))
                + "   # SIMULATED: try these knobs on the real engine")
