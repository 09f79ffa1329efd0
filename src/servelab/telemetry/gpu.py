"""GPUs through NVML (``pynvml``, from the nvidia-ml-py package), imported lazily.

No package, no driver, no GPU: ``open_gpus`` says why and the timeline records
the GPU as absent; nothing fails. A query a device does not support (power on
some boards) reads as None for that field only.
"""

from __future__ import annotations

GIB = 2**30


class Gpus:
    """Open NVML handles; ``devices`` is the static part, ``sample()`` the changing part."""

    def __init__(self, nvml, handles: list) -> None:
        self.nvml, self.handles = nvml, handles
        self.devices = [self._static(i, h) for i, h in enumerate(handles)]

    def _static(self, index: int, h) -> dict:
        nv = self.nvml
        name = _try(nv.nvmlDeviceGetName, h)
        mem = _try(nv.nvmlDeviceGetMemoryInfo, h)
        limit = _try(nv.nvmlDeviceGetEnforcedPowerLimit, h)  # milliwatts
        return {"index": index, "name": name.decode() if isinstance(name, bytes) else name,
                "memory_total_gib": mem.total / GIB if mem else None,
                "power_limit_w": limit / 1000 if limit else None,
                "sm_clock_max_mhz": _try(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM)}

    def sample(self) -> list[dict]:
        return [self._one(h) for h in self.handles]

    def _one(self, h) -> dict:
        nv = self.nvml
        util = _try(nv.nvmlDeviceGetUtilizationRates, h)  # % of the last sample period busy
        mem = _try(nv.nvmlDeviceGetMemoryInfo, h)
        power = _try(nv.nvmlDeviceGetPowerUsage, h)  # milliwatts
        return {"util": util.gpu if util else None, "mem_util": util.memory if util else None,
                "mem_used_gib": round(mem.used / GIB, 3) if mem else None,
                "power_w": power / 1000 if power is not None else None,
                "sm_clock_mhz": _try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
                "pstate": _try(nv.nvmlDeviceGetPerformanceState, h)}

    def close(self) -> None:
        _try(self.nvml.nvmlShutdown)


def open_gpus() -> tuple[Gpus | None, str]:
    """(handles, "ok") or (None, why the GPU is absent)."""
    try:
        import pynvml
    except ImportError:
        return None, "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
    try:
        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    except pynvml.NVMLError as exc:
        return None, f"NVML unavailable ({exc})"
    if not handles:
        _try(pynvml.nvmlShutdown)
        return None, "NVML found no GPU"
    return Gpus(pynvml, handles), "ok"


def _try(fn, *args):
    """NVML raises for unsupported queries; that field is then unknown, not fatal."""
    try:
        return fn(*args)
    except Exception:  # pynvml.NVMLError and its many subclasses
        return None
