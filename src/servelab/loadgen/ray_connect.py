"""Connecting to a Ray cluster (``--ray ADDRESS``) with a deadline, and to one on loopback.

Two things Ray does on its own that a user cannot live with (Ray 2.60, seen 2026-12-02):

- ``ray.init(address=...)`` against a head that cannot be reached never returns: it
  prints "Failed to connect to GCS at address … within 5 seconds" every few seconds,
  for as long as one waits. A connect in progress cannot be cancelled from Python, so
  the connect is first tried in a child process (``python -m servelab.loadgen.ray_connect
  ADDRESS``) that is killed, with its process group, at the deadline
  (``--ray-connect-timeout-s``); only a cluster that answered the child is joined here.
  The cost is one more connect (~2 s plus Ray's import), paid once per run.
- Ray rewrites a loopback address (127.0.0.1, localhost, ::1) to the machine's own IP
  before connecting (``services.resolve_ip_for_localhost``), so a cluster bound to
  127.0.0.1 is never found. For a loopback address we turn that rewrite off for the
  connect (Ray's ``ray_constants.ENABLE_RAY_CLUSTER``, the switch it reads on macOS and
  Windows to keep everything on loopback), then turn it back on.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

from servelab.errors import InputError

CONNECT_TIMEOUT_S = 30.0  # --ray-connect-timeout-s: Ray's import and connect take ~2–5 s on a busy machine
LOOPBACK = ("127.", "localhost", "::1", "[::1]")


def _ray():
    try:
        import ray
    except ImportError:
        raise InputError("--ray needs Ray: pip install 'servelab[ray]'") from None
    return ray


def connect(address: str | None, timeout_s: float = CONNECT_TIMEOUT_S) -> tuple:
    """Ray, connected to the cluster at ``address`` (auto: the local one) within ``timeout_s``,
    and its alive nodes' ids; InputError, one line naming the address, if it cannot be."""
    if not timeout_s > 0:
        raise InputError(f"--ray-connect-timeout-s must be more than 0 seconds, not {timeout_s:g}")
    ray = _ray()
    if not ray.is_initialized():
        where = address or "auto"
        probe(where, timeout_s)
        try:
            with _loopback_kept(where):
                ray.init(address=where, log_to_driver=False)
        except ConnectionError as exc:  # no cluster there: Ray's own words, on one line
            raise InputError(f"--ray {where}: {first_line(exc)}") from None
    return ray, [n["NodeID"] for n in ray.nodes() if n["Alive"]]


def probe(address: str, timeout_s: float) -> None:
    """Connect in a child process; InputError naming ``address`` if it fails or is not done in ``timeout_s``."""
    cmd = [sys.executable, "-m", "servelab.loadgen.ray_connect", address]
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = child.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)  # the connect and anything it started
        child.communicate()
        raise InputError(f"--ray {address}: no Ray cluster answered within {timeout_s:g} s "
                         "(--ray-connect-timeout-s); is its head running and reachable from here?") from None
    if child.returncode != 0:
        said = [line for line in err.splitlines() if line.strip()]
        raise InputError(f"--ray {address}: {said[-1][:300] if said else f'the connect exited {child.returncode}'}")


@contextlib.contextmanager
def _loopback_kept(address: str):
    """For a loopback address, Ray's rewrite of it to the machine's IP is off while inside."""
    if not address.startswith(LOOPBACK):
        yield
        return
    from ray._private import ray_constants

    was = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False  # get_node_ip_address() answers 127.0.0.1
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = was


def first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:300]


def _child(address: str) -> int:
    """The probe's side: connect, count the alive nodes, leave. A refusal is one line on stderr."""
    import ray

    try:
        with _loopback_kept(address):
            ray.init(address=address, log_to_driver=False, logging_level="ERROR")
    except ConnectionError as exc:
        print(first_line(exc), file=sys.stderr)
        return 1
    print(sum(1 for n in ray.nodes() if n["Alive"]))
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1]))
