"""Was the machine shared during a run? CPU time of the whole machine against servelab's own.

A neighbour moves latency figures more than anything servelab controls: with one process
spinning beside the demo on 2 cores, one engine start's runs ranged 233–862 ms in mean
TTFT (``bench/self_noise.py --busy 1``). So each run states how busy the machine's CPUs
were and with whose work, from two snapshots (before and after the run):

- *busy*: all CPUs' non-idle time (hypervisor steal included: a neighbouring VM), from
  the kernel's counters;
- *ours*: servelab's process tree — the process that started the command (its pid in
  ``SERVELAB_ROOT_PID``, inherited by workers and replicas), everything it started (an
  engine servelab launched, client workers, the scraper), and the children it reaped —
  and, when the server is on this machine, the tree of the process listening on its
  port (an engine started by hand: vLLM's API server and its engine core);
- *others* = busy − ours: other programs.

Each is a fraction of the machine's capacity (wall time × CPUs).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import time
import urllib.parse
from dataclasses import dataclass

import psutil

ROOT_ENV = "SERVELAB_ROOT_PID"
WARN_OTHERS = 0.25  # of the machine: one spinning process on 4 cores; half of one on 2
# listeners that forward to an engine in a container, whose processes are not the listener's
PROXIES = ("docker-proxy", "rootlessport", "slirp4netns", "pasta")
UNSEEN = "the engine's own processes (on this machine, but not seen: another user's, or a container's)"
RAY_ACTORS = "Ray's actors on this machine (they run under Ray, not under servelab)"


@dataclass(frozen=True, slots=True)
class CpuSnapshot:
    wall_s: float
    busy_s: float  # all CPUs together
    ours_s: float
    cpus: int


def mark_root() -> None:
    """Call where a command starts (and before spawning replicas): processes started from
    here count as servelab's own."""
    os.environ.setdefault(ROOT_ENV, str(os.getpid()))


def snapshot(engine_pids: tuple[int, ...] = ()) -> CpuSnapshot:
    """The machine's busy time and ours; ``engine_pids`` (``local_engine``) count as ours."""
    t = psutil.cpu_times()
    idle = t.idle + getattr(t, "iowait", 0.0)
    guest = getattr(t, "guest", 0.0) + getattr(t, "guest_nice", 0.0)  # Linux: inside user and nice too
    busy = sum(t) - idle - guest
    return CpuSnapshot(time.monotonic(), busy, _cpu_s(_trees([_root(), *_processes(engine_pids)])),
                       psutil.cpu_count() or 1)


def local_engine(base_url: str) -> tuple[tuple[int, ...], str | None]:
    """(pids, why not) for the server at ``base_url``: the processes listening on its port
    when its host is this machine, counted with servelab; ``why not`` says, when the
    engine is on this machine but cannot be told apart, what is then counted as others."""
    try:
        parts = urllib.parse.urlsplit(base_url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        if not _is_local(parts.hostname or ""):
            return (), None  # elsewhere: none of this machine's time is the engine's
        listeners = [c.pid for c in psutil.net_connections("tcp")
                     if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port]
        pids = {pid for pid in listeners if pid and _name(pid) not in PROXIES}
    except (ValueError, OSError, psutil.Error):
        return (), UNSEEN
    if not pids or len(pids) < len(listeners):
        return tuple(sorted(pids)), UNSEEN
    return tuple(sorted(pids)), None


def share(before: CpuSnapshot, after: CpuSnapshot) -> dict:
    """The result's ``machine`` section: busy, ours and others as fractions of capacity."""
    capacity = max(after.wall_s - before.wall_s, 1e-9) * after.cpus
    busy = min(max(after.busy_s - before.busy_s, 0.0) / capacity, 1.0)
    ours = min(max(after.ours_s - before.ours_s, 0.0) / capacity, busy)
    return {"cpus": after.cpus, "seconds": after.wall_s - before.wall_s, "busy_fraction": busy,
            "ours_fraction": ours, "others_fraction": busy - ours}


def warning(machine: dict | None) -> str | None:
    """One line when other programs took a share of the machine that moves latency figures;
    it names what may be among them that servelab could not tell apart (``unattributed``)."""
    others = (machine or {}).get("others_fraction") or 0.0
    if others < WARN_OTHERS:
        return None
    maybe = "; among them, perhaps, " + " and ".join(machine["unattributed"]) if machine.get("unattributed") else ""
    return (f"other programs kept {others:.0%} of the machine's {machine.get('cpus', '?')} CPUs busy during this "
            f"run (servelab and the engine: {machine.get('ours_fraction') or 0.0:.0%}){maybe}; latency figures "
            "move with such a neighbour")


def _root() -> psutil.Process:
    try:
        return psutil.Process(int(os.environ.get(ROOT_ENV, os.getpid())))
    except (ValueError, psutil.Error):
        return psutil.Process()


def _processes(pids) -> list[psutil.Process]:
    out = []
    for pid in pids:
        try:
            out.append(psutil.Process(pid))
        except psutil.Error:
            continue
    return out


def _trees(roots: list[psutil.Process]) -> list[psutil.Process]:
    """Each root and its live descendants, each process once."""
    seen: dict[int, psutil.Process] = {}
    for root in roots:
        try:
            family = [root, *root.children(recursive=True)]
        except psutil.Error:
            continue
        seen.update((p.pid, p) for p in family)
    return list(seen.values())


def _cpu_s(procs: list[psutil.Process]) -> float:
    """CPU seconds of these processes and of the children each of them reaped."""
    total = 0.0
    for proc in procs:
        try:
            t = proc.cpu_times()
        except psutil.Error:
            continue  # ended between the listing and the read: its time is in its parent's reaped
        total += t.user + t.system + t.children_user + t.children_system
    return total


def _is_local(host: str) -> bool:
    host = host.lower()
    try:
        address = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return host in ("localhost", socket.gethostname().lower())
    if address.is_loopback or address.is_unspecified:
        return True
    return any(a.address.split("%")[0] == str(address)
               for addrs in psutil.net_if_addrs().values() for a in addrs)


def _name(pid: int) -> str:
    try:
        return psutil.Process(pid).name()
    except psutil.Error:
        return ""
