"""What a result must say about where it was measured: the engine (version, dtype,
quantization, knobs), the model (a hash of its files), the memory it took, the hardware.

Engine knowledge is data: ``CONFIG_FIELDS`` lists what we read from vLLM's
"Initializing a V1 LLM engine (v0.32.0) with config: model=…, dtype=…" line.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
from functools import lru_cache
from pathlib import Path

from servelab.engines.process import group_members
from servelab.engines.ready import http_get
from servelab.telemetry.gpu import gpu_devices
from servelab.telemetry.host import cpu_model

GIB = 2**30
# vLLM's engine config line: field -> regex for its value (quoted or bare, up to the next ", ")
CONFIG_FIELDS = ("dtype", "quantization", "device_config", "kv_cache_dtype", "max_seq_len", "enforce_eager", "seed",
                 "enable_prefix_caching", "enable_chunked_prefill", "revision", "tokenizer")
_VERSION_LINE = re.compile(r"Initializing a V\d LLM engine \(v([^)]+)\) with config: (.*)")
# Files that define a model: its config, tokenizer and weights (not README, not images).
MODEL_FILE_PATTERNS = ("*.json", "*.safetensors", "*.bin", "*.gguf", "*.model", "*.pt", "*.txt")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt")
_hash_cache: dict[tuple, str] = {}


def engine_context(engine) -> dict:
    """What a result should say about the engine it measured (the result's servelab.engine)."""
    spec = engine.spec
    return {"name": spec.name, "kind": spec.kind, "model": spec.model, "args": list(spec.args),
            "env": dict(spec.env), "base_url": engine.base_url, "ready_s": engine.ready_s,
            "memory_report": engine.memory_report.to_dict(), "log": str(engine.log_path),
            "stated_args": dict(getattr(engine, "stated_args", {}))}


def engine_facts(engine) -> dict:
    """Version, config and model identity, read once per engine start."""
    log = _read(engine.log_path)
    config = parse_engine_config(log)
    return {"version": served_version(engine.base_url) or config.pop("version", None),
            "config": config, "model_files": model_identity(engine.spec.model), "launch": launch_line(log)}


def launch_line(log_text: str) -> str | None:
    """What ran, with its extra environment: the header ``start_engine`` writes as the log's first line."""
    first = log_text.split("\n", 1)[0]
    return first.split(": ", 1)[1] if first.startswith("# servelab engine") and ": " in first else None


def served_version(base_url: str) -> str | None:
    """vLLM answers ``GET /version`` with {"version": "0.32.0"}; other servers may not."""
    status, body = http_get(f"{base_url}/version")
    try:
        return str(json.loads(body)["version"]) if status == 200 else None
    except (ValueError, KeyError, TypeError):
        return None


def parse_engine_config(log_text: str) -> dict:
    """Fields of vLLM's engine config line, as the strings it printed ("torch.bfloat16", "None")."""
    match = _VERSION_LINE.search(log_text)
    if not match:
        return {}
    found = {"version": match.group(1)}
    for name in CONFIG_FIELDS:
        value = re.search(rf"(?:^|, ){name}=('[^']*'|[^,]*)", match.group(2))
        if value:
            found[name] = value.group(1).strip("'")
    return found


def model_identity(model: str) -> dict:
    """Local model: its files, their total size and one sha256 over them (the revision
    we actually served). A hub id we cannot see: the id alone, and say so."""
    path = Path(os.path.expanduser(model)) if model else None
    if path is None or not path.exists():
        return {"name": model, "local": False, "sha256": None, "note": "not a local path: no hash"}
    files = _model_files(path)
    weights = sum(f.stat().st_size for f in files if f.suffix in WEIGHT_SUFFIXES)
    return {"name": model, "local": True, "files": [f.name for f in files], "sha256": _files_hash(files),
            "weights_gib": round(weights / GIB, 4)}


def _model_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted({f for pattern in MODEL_FILE_PATTERNS for f in path.glob(pattern) if f.is_file()})


def _files_hash(files: list[Path]) -> str:
    """sha256 over (name, bytes) of each file in name order; cached per process by size and mtime."""
    key = tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    if key not in _hash_cache:
        h = hashlib.sha256()
        for f in files:
            h.update(f.name.encode() + b"\0")
            with open(f, "rb") as data:
                for block in iter(lambda: data.read(1 << 20), b""):
                    h.update(block)
        _hash_cache[key] = h.hexdigest()
    return _hash_cache[key]


def footprint_gib(engine) -> float | None:
    """Memory the engine's processes hold (sum of PSS: shared pages split between them,
    so nothing counts twice). For the CPU build this is the whole budget; on a GPU
    it is host memory only."""
    import psutil

    if engine.pid is None:
        return None
    total = 0
    for pid in group_members(engine.pid):
        try:
            total += psutil.Process(pid).memory_full_info().pss
        except (psutil.Error, AttributeError):
            continue
    return round(total / GIB, 3) if total else None


@lru_cache(maxsize=1)
def hardware() -> dict:
    """The machine the study ran on: CPU, cores, memory, GPUs (NVML when available)."""
    import psutil

    return {"cpu": cpu_model(), "cores": os.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / GIB, 1),
            "os": f"{platform.system()} {platform.release()}", "python": platform.python_version(),
            "gpus": _gpus()}


def _gpus() -> list[str]:
    return [f"{d['name']} ({d['memory_total_gib'] or 0:.0f} GiB)" for d in gpu_devices()]  # [] on a CPU machine


def _read(path: Path) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""
