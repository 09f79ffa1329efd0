"""Accelerator datasheets: memory, memory bandwidth, dense bf16/fp8 tensor peak.

memory_gib is the device's total as the driver reports it (``nvidia-smi``'s
memory.total in MiB / 1024; vLLM's ``gpu_memory_utilization`` is a fraction of
that total), not the marketing "GB". Bandwidth and TFLOPS are the vendors'
datasheet peaks (dense, no sparsity); real kernels reach 70–90 % of bandwidth.
SXM/OAM parts where there are several (A100, H100).

"cpu" is this kind of machine for vLLM's CPU build and llama.cpp: its memory is
read from the machine at the edge (``None`` here), and its bandwidth and compute
are rough figures for 2 server cores; ``plan --calibrate`` fits the real step times.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Gpu:
    name: str
    memory_gib: float | None
    bandwidth_gbs: float
    bf16_tflops: float
    fp8_tflops: float | None = None  # None: no fp8 tensor cores (weights are upcast)

    def tflops(self, fp8: bool) -> float:
        return self.fp8_tflops if fp8 and self.fp8_tflops else self.bf16_tflops


_TABLE = [
    Gpu("A10", 23028 / 1024, 600, 125),
    Gpu("L4", 23034 / 1024, 300, 121, 242),
    Gpu("A40", 46068 / 1024, 696, 150),
    Gpu("L40S", 46068 / 1024, 864, 362, 733),
    Gpu("A100-40GB", 40960 / 1024, 1555, 312),
    Gpu("A100-80GB", 81920 / 1024, 2039, 312),
    Gpu("H100", 81559 / 1024, 3350, 989, 1979),
    Gpu("H200", 143771 / 1024, 4800, 989, 1979),
    Gpu("B200", 183359 / 1024, 8000, 2250, 4500),
    Gpu("MI300X", 196592 / 1024, 5300, 1307, 2615),
    Gpu("RTX4090", 24564 / 1024, 1008, 165, 330),
    # RTX 3090: 24 GB GDDR6X at 936 GB/s, 71 dense fp16-tensor TFLOPS with fp32 accumulate
    # (NVIDIA Ampere GA102 whitepaper, 2020). H20: 96 GB HBM3 at 4.0 TB/s, 148 bf16 / 296 fp8
    # dense TFLOPS (NVIDIA's H20 specification as reported at launch, 2023-11); its memory here is
    # the nominal 96 GiB, not a driver's figure (none seen).
    Gpu("RTX3090", 24576 / 1024, 936, 71),
    Gpu("H20", 96.0, 4000, 148, 296),
    # 2 EPYC cores: llama.cpp's F16 SmolLM2 (269 MB) took 12.2 ms per decode step here
    # (plan --calibrate), so they stream at least ~22 GB/s; 0.2 TFLOPS ≈ 2 cores × AVX-512.
    Gpu("cpu", None, 25, 0.2),
]

GPUS: dict[str, Gpu] = {gpu.name: gpu for gpu in _TABLE}
_ALIASES = {"A100": "A100-80GB", "A100-80G": "A100-80GB", "A100-40G": "A100-40GB", "H100-SXM": "H100",
            "4090": "RTX4090", "RTX-4090": "RTX4090",
            "3090": "RTX3090", "RTX-3090": "RTX3090"}


def find_gpu(name: str) -> Gpu | None:
    """A table GPU by name, any case, with or without separators ("a100_80gb", "rtx 4090")."""
    def norm(text: str) -> str:
        return text.upper().replace("_", "-").replace(" ", "")

    key = norm(name)
    key = _ALIASES.get(key, key)
    return next((gpu for gpu in _TABLE if norm(gpu.name) == key), None)
