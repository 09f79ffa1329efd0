"""W3C Trace Context for each request (``--traceparent``): a ``traceparent`` header whose trace id
the record keeps, so servelab's per-request timings join the engine's own spans (vLLM's server
reads an incoming traceparent and records its queue, prefill and decode spans under it).

The ids are derived from the run's seed and the request's id, not drawn: the same run sends the
same ids, and the record can name its trace without carrying anything from the request path.
Format (https://www.w3.org/TR/trace-context/): ``00-<32 hex trace id>-<16 hex parent id>-01``
(version 00, sampled); an all-zero id is invalid, hence the guard.
"""

from __future__ import annotations

import hashlib

HEADER = "traceparent"


def ids(seed: int, request_id: str) -> tuple[str, str]:
    """(trace id, parent span id) of a request, lowercase hex."""
    digest = hashlib.sha256(f"servelab-trace:{seed}:{request_id}".encode()).hexdigest()
    trace, span = digest[:32], digest[32:48]
    return (trace if trace.strip("0") else "1".rjust(32, "0")), (span if span.strip("0") else "1".rjust(16, "0"))


def traceparent(seed: int, request_id: str) -> str:
    trace, span = ids(seed, request_id)
    return f"00-{trace}-{span}-01"


def trace_id(seed: int, request_id: str) -> str:
    return ids(seed, request_id)[0]
