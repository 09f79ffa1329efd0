"""Is the client measuring the server, or itself? Run it against the mock, whose
recorded truth (when each request arrived, when each event was written) is the
yardstick, and report the difference.

* error of a metric = the client's statistic − the same statistic of the truth
  (truth TTFT = first content write − request arrival at the mock's socket, the
  kernel's stamp; truth ITL = gaps between content writes), over the requests
  both sides saw;
* where an error comes from: request delivery (arrival at the mock's socket −
  client sent: the client's send path plus the kernel) and event delivery (client
  arrival − mock write: the kernel plus the client's loop delay). TTFT error =
  the sum. The mock's own delay in reading a request (read − arrival) is part of
  the true TTFT — the client did wait for it — and is shown apart as
  ``mock_read_delay``: a large one means the mock, not the client, is saturated.
* server-side open = the time-weighted mean of requests open at the mock over
  the steady window: from the moment the C-th request arrived (the cap is first
  reachable) to the moment the last one arrived (after that the run drains). A
  client that is slow to replace a finished stream shows here as < C. C is the
  streams that ran: min(--concurrency, requests). With no more requests than
  streams, all are sent at once and none is replaced: the window is empty and the
  figure is None (not NaN: it would print "nan" and write invalid JSON).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

import numpy as np

from servelab.errors import ServerError
from servelab.mock.truth import Truth
from servelab.records import RequestRecord, SampleRequest

NS_PER_MS = 1e6


@dataclass(frozen=True, slots=True)
class Fidelity:
    matched: int
    client_ttft_mean_ms: float
    truth_ttft_mean_ms: float
    ttft_mean_err_ms: float
    ttft_p99_err_ms: float
    itl_mean_err_ms: float
    itl_p99_err_ms: float
    server_open_mean: float | None
    concurrency: int
    request_delivery_mean_ms: float | None = None
    request_delivery_p99_ms: float | None = None
    event_delivery_mean_ms: float | None = None
    event_delivery_p99_ms: float | None = None
    mock_read_delay_mean_ms: float | None = None
    mock_read_delay_p99_ms: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Seen:
    """What the client saw of one request; absolute times when known."""

    ttft_ms: float
    itl_ms: list[float]
    sent_ns: int | None = None
    token_ns: tuple[int, ...] = ()


def client_view(records: list[RequestRecord]) -> dict[str, Seen]:
    """request id -> what the client saw, for the requests that succeeded."""
    out = {}
    for r in records:
        if r.success and r.token_ns:
            gaps = np.diff(np.asarray(r.token_ns, dtype=np.int64)) / NS_PER_MS
            out[r.request_id] = Seen(r.ttft_ns / NS_PER_MS, gaps.tolist(), r.sent_ns, r.token_ns)
    return out


def _delivery(both) -> dict:
    """Split TTFT error into its two legs, where absolute times are known."""
    req = [(r.arrived_ns - c.sent_ns) / NS_PER_MS for c, r in both if c.sent_ns is not None]
    read = [(r.recv_ns - r.wire_ns) / NS_PER_MS for _, r in both if r.wire_ns is not None]
    ev = [(a - w) / NS_PER_MS for c, r in both if c.token_ns and len(c.token_ns) == len(r.event_ns)
          for a, w in zip(c.token_ns, r.event_ns)]
    out = {}
    for name, vals in (("request_delivery", req), ("event_delivery", ev), ("mock_read_delay", read)):
        if vals:
            out[f"{name}_mean_ms"] = float(np.mean(vals))
            out[f"{name}_p99_ms"] = float(np.percentile(vals, 99))
    return out


def open_mean(truth: Truth, t_a: int, t_b: int) -> float | None:
    """Time-weighted mean of the open-request count over [t_a, t_b]; None for an empty window."""
    if t_b <= t_a:
        return None
    t = np.asarray(truth.open_t_ns, dtype=np.int64)
    n = np.asarray(truth.open_n, dtype=float)
    edges = np.clip(np.append(t, t_b), t_a, t_b)
    return float(np.sum(n * np.diff(edges)) / (t_b - t_a))


def steady_window(truth: Truth, concurrency: int) -> tuple[int, int]:
    recvs = sorted(r.arrived_ns for r in truth.requests)
    if len(recvs) <= concurrency:
        return (recvs[-1], recvs[-1]) if recvs else (0, 0)
    return recvs[concurrency - 1], recvs[-1]


def compare(client: dict[str, Seen], truth: Truth, concurrency: int) -> Fidelity:
    """Raises ``ServerError`` when no request is on both sides: errors over nothing would
    print +0.00 ms, a perfect score for nothing measured."""
    both = [(client[r.request_id], r) for r in truth.requests if r.request_id in client and r.event_ns]
    if not both:
        raise ServerError(f"no request matched between the client ({len(client)} succeeded) and the mock's "
                          f"truth ({len(truth.requests)} recorded): nothing was measured")
    c_ttft = np.array([c.ttft_ms for c, _ in both] or [0.0])
    t_ttft = np.array([r.ttft_ns / NS_PER_MS for _, r in both] or [0.0])
    c_itl = np.array([g for c, _ in both for g in c.itl_ms] or [0.0])
    t_itl = np.array([g / NS_PER_MS for _, r in both for g in r.itl_ns] or [0.0])
    return Fidelity(
        matched=len(both),
        client_ttft_mean_ms=float(c_ttft.mean()), truth_ttft_mean_ms=float(t_ttft.mean()),
        ttft_mean_err_ms=float(c_ttft.mean() - t_ttft.mean()),
        ttft_p99_err_ms=float(np.percentile(c_ttft, 99) - np.percentile(t_ttft, 99)),
        itl_mean_err_ms=float(c_itl.mean() - t_itl.mean()),
        itl_p99_err_ms=float(np.percentile(c_itl, 99) - np.percentile(t_itl, 99)),
        server_open_mean=open_mean(truth, *steady_window(truth, concurrency)),
        concurrency=concurrency, **_delivery(both),
    )


def synthetic_requests(n: int, output_len: int, prefix: str = "selftest-") -> list[SampleRequest]:
    """Tiny fixed prompts: the mock ignores content, so the client's work is the stream."""
    return [SampleRequest("Say hello to the benchmark.", 6, output_len, f"{prefix}{i}") for i in range(n)]


def pin_to_cpus(cpus: set[int]) -> bool:
    """Pin this process (the client) to ``cpus`` where the OS allows it."""
    try:
        os.sched_setaffinity(0, cpus)
        return True
    except (AttributeError, OSError):
        return False
