"""Small helpers for tests that start servers: a free port, is a port open, wait for a condition.

Importable by name from any test (pytest puts ``tests/`` on the path for the top conftest.py).
"""

from __future__ import annotations

import random
import socket
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int) -> bool:
    """Something accepts connections on 127.0.0.1:``port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def wait_until(predicate, timeout_s: float, step_s: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step_s)
    return predicate()


def free_ports(n: int) -> int:
    """A base port with the next n - 1 free too (replica i listens on base + i), below the
    ephemeral range so that no client's outgoing connection takes one meanwhile."""
    rng = random.Random()
    for _ in range(100):
        base = rng.randrange(20000, 32000 - n)
        if all(bindable(base + i) for i in range(n)):
            return base
    raise RuntimeError("no run of free ports")


def bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
