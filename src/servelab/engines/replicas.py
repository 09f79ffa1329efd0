"""N replicas of one engine spec on one machine: each its own port and its own share
of the hardware, so replicas measured together compete only where the hardware
makes them (memory bandwidth, caches), not because two were told to use one core.

    specs = replica_specs(spec, n=2, cores=[0, 1], devices=[])   # ports 8000, 8001

What "a share" means is engine knowledge, kept here as data per kind:
- vLLM's CPU build: ``VLLM_CPU_OMP_THREADS_BIND`` = the replica's cores ("0", "2,3"; with
  ``--tensor-parallel-size t`` its cores split into t lists joined by "|", one per rank —
  vLLM's format, envs.py of 0.32);
- vLLM on GPUs: ``CUDA_VISIBLE_DEVICES`` = the replica's devices;
- llama.cpp: ``--threads`` = its number of cores (xllamacpp does not pin threads);
- command: ``{port}`` and ``{replica}`` filled in its command line (``fill``), its ready URL
  moved to the replica's port;
- sim: a port only (the simulator's speed is modelled, not measured).
A setting the user gave (``--env VLLM_CPU_OMP_THREADS_BIND=…``, ``-- --threads 4``) wins.
"""

from __future__ import annotations

import dataclasses

from servelab.engines.spec import EngineSpec, flag_value
from servelab.engines.vllm import vllm_build
from servelab.errors import InputError


def fill(text: str, port: int, replica: int) -> str:
    """A command engine's ``{port}`` and ``{replica}`` placeholders, filled for one replica."""
    return text.replace("{port}", str(port)).replace("{replica}", str(replica))


def with_port(url: str, port: int) -> str:
    """A command engine's ready URL moved to a replica's port (the template names the first's)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    return urlunsplit(parts._replace(netloc=f"{host}:{port}"))


def shares(items: list, n: int, what: str) -> list[list]:
    """``items`` split into n equal contiguous shares (the remainder unused); InputError if < 1 each."""
    size = len(items) // n
    if size < 1:
        raise InputError(f"{n} replicas need at least {n} {what}; {len(items)} available ({items})")
    return [items[i * size:(i + 1) * size] for i in range(n)]


def replica_specs(spec: EngineSpec, n: int, cores: list[int], devices: list[str]) -> list[EngineSpec]:
    """The n specs: ports spec.port + i, names ``<name>-r<i>``, each with its share."""
    return [with_share(placed(spec, i), i, n, cores, devices) for i in range(n)]


def placed(spec: EngineSpec, i: int) -> EngineSpec:
    """Replica i without its share of the hardware: its port, name and filled placeholders
    (``scale --ray`` adds the share on the node that runs it: only that node knows its cores)."""
    if spec.kind == "external":
        raise InputError("scale starts its replicas; an external server cannot be replicated (use another --engine)")
    port, name = spec.port + i, f"{spec.name}-r{i}"
    if spec.kind == "command":
        # one replace, so the spec is checked once, with its port and ready URL both moved
        return dataclasses.replace(spec, name=name, port=port, command=tuple(fill(a, port, i) for a in spec.command),
                                   args=tuple(fill(a, port, i) for a in spec.args),
                                   ready_url=with_port(spec.ready_url or "", port))
    return dataclasses.replace(spec, name=name, port=port)


def with_share(spec: EngineSpec, slot: int, of: int, cores: list[int], devices: list[str]) -> EngineSpec:
    """``spec`` given share ``slot`` of ``of`` equal shares of ``cores`` / ``devices``."""
    if spec.kind in ("embedded", "vllm"):
        return _vllm_share(spec, slot, of, cores, devices)
    if spec.kind == "llamacpp" and not _given(spec.args, "--threads", "-t"):
        return dataclasses.replace(spec, args=(*spec.args, "--threads", str(len(shares(cores, of, "cores")[slot]))))
    return spec


def _vllm_share(spec: EngineSpec, i: int, n: int, cores: list[int], devices: list[str]) -> EngineSpec:
    if vllm_build() == "cpu":
        key, value = "VLLM_CPU_OMP_THREADS_BIND", cpu_bind(shares(cores, n, "cores")[i], _ranks(spec.args))
    else:
        key, value = "CUDA_VISIBLE_DEVICES", ",".join(shares(devices, n, "GPUs")[i])
    if key in spec.env:
        return spec
    return dataclasses.replace(spec, env={**spec.env, key: value})


def cpu_bind(cores: list[int], ranks: int = 1) -> str:
    """vLLM's CPU binding value: each rank's core ids comma-joined, ranks joined by "|"."""
    rank_cores = shares(cores, ranks, "cores (one per tensor-parallel rank)")
    return "|".join(",".join(str(c) for c in group) for group in rank_cores)


def _ranks(args: tuple[str, ...]) -> int:
    value = flag_value(args, "--tensor-parallel-size") or flag_value(args, "-tp") or "1"
    try:
        return int(value)
    except ValueError:
        raise InputError(f"--tensor-parallel-size {value!r} is not an integer") from None


def _given(args: tuple[str, ...], *flags: str) -> bool:
    return any(flag_value(args, f) is not None for f in flags)
