"""Engines: launch an LLM server, wait until it answers, read its memory report, stop it.

    spec = EngineSpec(name="qwen", kind="vllm", model="Qwen/Qwen3-8B", args=["--max-num-seqs", "64"])
    with start_engine(spec, log_dir=Path("runs/x")) as engine:
        engine.base_url, engine.model, engine.memory_report.kv_cache_tokens

Kinds (``ENGINES``): vllm (GPU ``vllm serve`` or the CPU build), llamacpp
(xllamacpp, a GGUF file), external (a URL someone else runs), command (any argv
plus a ready URL). ``embedded_engine_spec()`` is the offline default: vLLM's
CPU build serving SmolLM2-135M-Instruct.

Nothing heavy is imported here: transformers/torch only inside
``ensure_embedded_model`` when the model cache is cold.
"""

from servelab.engines.embedded import embedded_engine_spec, ensure_embedded_model
from servelab.engines.engine import Engine, start_engine
from servelab.engines.guard import Terminated, sigterm_as_interrupt
from servelab.engines.kinds import ENGINES, EngineKind
from servelab.engines.memory import MemoryReport, parse_memory_report
from servelab.engines.spec import KINDS, EngineSpec

__all__ = [
    "ENGINES", "KINDS", "Engine", "EngineKind", "EngineSpec", "MemoryReport", "Terminated",
    "embedded_engine_spec", "ensure_embedded_model", "parse_memory_report",
    "sigterm_as_interrupt", "start_engine",
]
