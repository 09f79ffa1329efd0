"""Fixtures shared by the load generator's tests."""

from __future__ import annotations

import pytest

from servelab.sim.model import EngineLimits, StepModel


@pytest.fixture
def sim_server():
    """The sim engine's server (engines/sim_main.SimServer) in a thread: its own block manager."""
    import asyncio
    import threading

    from servelab.engines.sim_main import SimServer
    from servelab.mock.config import MockConfig
    from servelab.mock.server import new_event_loop

    loops = []

    def start(limits: EngineLimits):
        loop = new_event_loop()
        server = SimServer(MockConfig(port=0, default_max_tokens=16), limits, StepModel())
        started = threading.Event()

        def main():
            asyncio.set_event_loop(loop)
            loop.run_until_complete(server.start())
            started.set()
            loop.run_forever()

        threading.Thread(target=main, daemon=True).start()
        assert started.wait(10)
        loops.append(loop)
        return server

    yield start
    for loop in loops:
        loop.call_soon_threadsafe(loop.stop)
