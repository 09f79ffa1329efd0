"""GPUs through NVML (``pynvml``, from the nvidia-ml-py package), imported lazily.

This is the only module that talks to NVML: the timeline's sampler, ``servelab gpu``'s
pre-flight check, the planner's and the tuner's device, and a result's hardware facts
all come through here, so pynvml's errors are translated in one place.

No package, no driver, no GPU: ``open_gpus`` says why and the caller treats the
GPU as absent; nothing fails. A query a device does not support (power on
some boards) reads as None for that field only.
"""

from __future__ import annotations

from servelab.telemetry.host import process_name

GIB = 2**30


class Gpus:
    """Open NVML handles; ``devices`` is the static part, ``sample()`` the changing part."""

    def __init__(self, nvml, handles: list) -> None:
        self.nvml, self.handles = nvml, handles
        self.devices = [self._static(i, h) for i, h in enumerate(handles)]

    def query(self, fn, *args):
        return _query(self.nvml, fn, *args)

    def _static(self, index: int, h) -> dict:
        nv, q = self.nvml, self.query
        mem = q(nv.nvmlDeviceGetMemoryInfo, h)
        limit = q(nv.nvmlDeviceGetEnforcedPowerLimit, h)  # milliwatts
        return {"index": index, "name": q(nv.nvmlDeviceGetName, h),
                "memory_total_gib": mem.total / GIB if mem else None,
                "power_limit_w": limit / 1000 if limit else None,
                "sm_clock_max_mhz": q(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM)}

    def sample(self) -> list[dict]:
        return [self._one(h) for h in self.handles]

    def _one(self, h) -> dict:
        nv, q = self.nvml, self.query
        util = q(nv.nvmlDeviceGetUtilizationRates, h)  # % of the last sample period busy
        mem = q(nv.nvmlDeviceGetMemoryInfo, h)
        power = q(nv.nvmlDeviceGetPowerUsage, h)  # milliwatts
        energy = q(nv.nvmlDeviceGetTotalEnergyConsumption, h)  # millijoules since the driver loaded (Volta+)
        return {"util": util.gpu if util else None, "mem_util": util.memory if util else None,
                "mem_used_gib": round(mem.used / GIB, 3) if mem else None,
                "power_w": power / 1000 if power is not None else None,
                "energy_j": energy / 1000 if energy is not None else None,
                "sm_clock_mhz": q(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
                "pstate": q(nv.nvmlDeviceGetPerformanceState, h)}

    def close(self) -> None:
        self.query(self.nvml.nvmlShutdown)


def open_gpus() -> tuple[Gpus | None, str]:
    """(handles, "ok") or (None, why the GPU is absent)."""
    try:
        import pynvml
    except ImportError:
        return None, "nvidia-ml-py is not installed (the gpu extra: pip install 'servelab[gpu]')"
    try:
        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    except pynvml.NVMLError as exc:
        return None, f"NVML unavailable ({exc})"
    if not handles:
        _query(pynvml, pynvml.nvmlShutdown)
        return None, "NVML found no GPU"
    return Gpus(pynvml, handles), "ok"


def gpu_devices() -> list[dict]:
    """Every visible GPU's static facts (``Gpus.devices``: name, memory_total_gib …); [] on a CPU machine."""
    opened, _ = open_gpus()
    if opened is None:
        return []
    try:
        return opened.devices
    finally:
        opened.close()


def gpu_check() -> dict:
    """``servelab gpu``'s pre-flight check: {"gpus": [...], "driver_version", "cuda_version", "nvml_error"},
    nvml_error set (and the rest empty) when no GPU is visible."""
    opened, why = open_gpus()
    if opened is None:
        return {"gpus": [], "driver_version": None, "cuda_version": None, "nvml_error": why}
    nv, q = opened.nvml, opened.query
    try:
        cuda = q(nv.nvmlSystemGetCudaDriverVersion)  # e.g. 12040 -> "12.4"
        return {"gpus": [_checked(opened, h, i) for i, h in enumerate(opened.handles)],
                "driver_version": q(nv.nvmlSystemGetDriverVersion),
                "cuda_version": None if cuda is None else f"{cuda // 1000}.{cuda % 1000 // 10}", "nvml_error": None}
    finally:
        opened.close()


def _checked(gpus: Gpus, handle, index: int) -> dict:
    nv, q = gpus.nvml, gpus.query
    memory = q(nv.nvmlDeviceGetMemoryInfo, handle)
    util = q(nv.nvmlDeviceGetUtilizationRates, handle)
    capability = q(nv.nvmlDeviceGetCudaComputeCapability, handle)
    pstate = q(nv.nvmlDeviceGetPerformanceState, handle)
    return {
        "index": index,
        "name": q(nv.nvmlDeviceGetName, handle),
        "compute_capability": f"{capability[0]}.{capability[1]}" if capability else None,
        "memory_total_gib": _gib(memory.total) if memory else None,
        "memory_used_gib": _gib(memory.used) if memory else None,
        "memory_free_gib": _gib(memory.free) if memory else None,
        "pstate": f"P{pstate}" if pstate is not None else None,
        "power_draw_w": _watts(q(nv.nvmlDeviceGetPowerUsage, handle)),  # NVML reports mW
        "power_cap_w": _watts(q(nv.nvmlDeviceGetEnforcedPowerLimit, handle)),
        "utilization_gpu_pct": util.gpu if util else None,
        "utilization_memory_pct": util.memory if util else None,
        "processes": _processes(gpus, handle),
    }


def _processes(gpus: Gpus, handle) -> list[dict]:
    found = gpus.query(gpus.nvml.nvmlDeviceGetComputeRunningProcesses, handle) or []
    return [{"pid": p.pid, "name": process_name(p.pid),
             "used_gib": _gib(p.usedGpuMemory) if p.usedGpuMemory is not None else None} for p in found]


def _query(nvml, fn, *args):
    """fn(*args), or None when this GPU or driver does not support it; bytes decoded to str.
    The one place pynvml's errors are caught: a field is unknown, never fatal (any other error is a bug)."""
    try:
        value = fn(*args)
    except nvml.NVMLError:  # and its many subclasses (NVMLError_NotSupported …)
        return None
    return value.decode() if isinstance(value, bytes) else value


def _gib(n_bytes: int) -> float:
    return round(n_bytes / GIB, 2)


def _watts(milliwatts: int | None) -> float | None:
    return None if milliwatts is None else round(milliwatts / 1000, 1)
