import pytest

from servelab.mock import MockConfig, run_in_thread


@pytest.fixture
def start_mock():
    """start_mock(**MockConfig fields) -> a running mock in a thread, stopped after the test."""
    handles = []

    def start(**kw):
        handle = run_in_thread(MockConfig(port=0, **kw))
        handles.append(handle)
        return handle

    yield start
    for h in handles:
        h.stop()
