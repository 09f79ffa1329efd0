"""An engine's process group: launch it, find its members, stop all of them.

Every engine runs in its own session (``start_new_session``), so its pid is also
its process-group id, and every process it forks (vLLM's EngineCore, workers)
stays in that group unless it moves itself. We signal and count by group, never
by name.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import psutil

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_LIBC = None  # loaded in the parent: dlopen after fork() can deadlock


def launch(argv: list[str], env: dict[str, str], log_path: Path) -> subprocess.Popen:
    """Start ``argv`` in a new session, stdout and stderr appended to ``log_path``."""
    with open(log_path, "ab") as log:  # the child keeps its own descriptor
        return subprocess.Popen(
            argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=_death_signal_hook(),
        )


def _death_signal_hook():
    """A preexec_fn asking the kernel to SIGTERM the engine if servelab dies (Linux).

    The kernel sends it when the *thread* that forked exits, so we only ask from
    the main thread, whose life is the process's. It reaches the direct child
    only; the watchdog (guard.py) covers the rest of the group.
    """
    global _LIBC
    if threading.current_thread() is not threading.main_thread() or not Path("/proc").is_dir():
        return None
    _LIBC = _LIBC or ctypes.CDLL(None, use_errno=True)
    libc, parent = _LIBC, os.getpid()

    def hook() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # servelab died before prctl took effect
            os.kill(os.getpid(), signal.SIGKILL)

    return hook


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) pids in process group ``pgid``; zombies hold no memory or port."""
    members = []
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                members.append(proc.pid)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return members


def describe(pids: list[int]) -> str:
    """"123 VLLM::Worker (disk-sleep), …" — for an error naming what would not die."""
    parts = []
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            parts.append(f"{pid} {proc.name()} ({proc.status()})")
        except psutil.Error:
            parts.append(f"{pid} (gone)")
    return ", ".join(parts)


def signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # already gone (PermissionError: macOS says so for a group of zombies)


def stop_group(proc: subprocess.Popen, grace_s: float, kill_wait_s: float = 10.0) -> list[int]:
    """SIGTERM the whole group, wait ``grace_s``, then SIGKILL it; return survivors' pids.

    Even SIGKILL needs a moment: a process in uninterruptible sleep (I/O on a busy
    machine) dies only when that I/O ends, and tearing down GiBs of memory takes time.
    """
    pgid = proc.pid
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, kill_wait_s)):
        signal_group(pgid, sig)
        if _wait_group_gone(proc, wait_s):
            return []
    return group_members(pgid)


def _wait_group_gone(proc: subprocess.Popen, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        proc.poll()  # reap the leader, or it lingers as our zombie
        if not group_members(proc.pid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def port_listener(port: int) -> int | None:
    """The pid listening on TCP ``port`` (any address), or None when none does or it is not ours
    to see (another user's process)."""
    try:
        found = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, OSError):
        return None
    return next((c.pid for c in found if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port
                 and c.pid is not None), None)


def in_group(pid: int, pgid: int) -> bool:
    try:
        return os.getpgid(pid) == pgid
    except OSError:  # gone since
        return False


def port_in_use(host: str, port: int) -> bool:
    """True when something listens on (host, port): we could neither bind nor be refused."""
    family, _, _, _, address = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM)[0]
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # SO_REUSEADDR: a port in TIME_WAIT is free for a server (uvicorn sets it too).
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError:
            return True
    return _accepts(_client_host(host), port)


def _accepts(host: str, port: int) -> bool:
    # A listener on another address of the same port (0.0.0.0 vs 127.0.0.1) may not
    # stop our bind on every OS, but it would steal the engine's clients.
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _client_host(host: str) -> str:
    return "127.0.0.1" if host in ("", "0.0.0.0", "::") else host


def wait_port_free(host: str, port: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while port_in_use(host, port):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True
