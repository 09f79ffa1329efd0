"""A mock OpenAI-compatible server that knows the truth (``servelab mock``).

    server = MockServer(MockConfig(ttft_ms=50, itl_ms=10, port=0)); await server.start()
    with run_in_thread(MockConfig(port=0)) as mock: ... mock.truth()
    with run_in_subprocess(MockConfig(port=0), cpu=[1]) as mock: ...   # to measure a client

``summarize(truth)``, ``mean_open(truth, start_ns, end_ns)`` and ``lateness_ns`` turn
the recorded truth into the numbers a client's results are checked against.
"""

from servelab.mock.config import FAILURE_KINDS, MockConfig
from servelab.mock.launch import ProcessHandle, ThreadHandle, run_in_subprocess, run_in_thread
from servelab.mock.server import MockServer
from servelab.mock.truth import RequestTruth, Truth, TruthSummary, lateness_ns, mean_open, summarize

__all__ = [
    "FAILURE_KINDS", "MockConfig", "MockServer", "ProcessHandle", "RequestTruth", "ThreadHandle",
    "Truth", "TruthSummary", "lateness_ns", "mean_open", "run_in_subprocess", "run_in_thread",
    "summarize",
]
