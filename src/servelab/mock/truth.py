"""What the mock actually sent and when: the yardstick a client is measured against.

Times are ``time.perf_counter_ns()`` (CLOCK_MONOTONIC), so they compare directly with a
client process on the same machine. Recording is appends of ints to lists; the frozen
snapshot (``Truth``) and its summary are built only when someone asks.

JSON shape (``Truth.to_dict``)::

    {"clock": "perf_counter_ns", "config": {...MockConfig...},
     "start_ns": int,                       # when recording (re)started
     "requests": [{"request_id", "endpoint": "completions"|"chat", "stream": bool,
                   "recv_ns",            # read by the mock
                   "wire_ns"|null,       # arrived at its socket (kernel stamp; Linux)
                   "admit_ns"|null, "end_ns"|null,
                   "event_ns": [int, ...], "event_tokens": [int, ...],   # per content write;
                                                # events sent in one write share its time
                   "finish": "ok"|"http500"|"abort"|"stall"|"disconnect"|"stopped"|null,
                   "finish_reason": "length"|"stop"|null,
                   "prompt_tokens", "planned_tokens", "output_tokens",
                   "messages"|null,            # with record_messages: the chat messages received
                   "tool_call_id"|null,        # the id of the tool call it answered with
                   "answer"|null, "corrupted_at"|null,  # with answers "prompt" (mock/answers.py)
                   "constraint"|null,  # a structured-output request's kind (json, regex, choice)
                   "honoured"|null}, ...],  # ... whether its answer was a whole valid text (mock/constrained.py)
     "open": {"t_ns": [int, ...], "n": [int, ...]}}   # open requests after each edge
"""

from __future__ import annotations

import json

from dataclasses import asdict, dataclass
from time import perf_counter_ns


class RequestLog:
    """Mutable per-request record, appended to on the hot path."""

    __slots__ = (
        "request_id", "endpoint", "stream", "recv_ns", "wire_ns", "admit_ns", "end_ns", "event_ns",
        "event_tokens", "finish", "finish_reason", "prompt_tokens", "planned_tokens", "messages",
        "answer", "corrupted_at", "constraint", "honoured", "tool_call_id",
    )

    def __init__(self, request_id: str, endpoint: str, stream: bool, recv_ns: int,
                 wire_ns: int | None = None) -> None:
        self.request_id = request_id
        self.endpoint = endpoint
        self.stream = stream
        self.recv_ns = recv_ns
        self.wire_ns = wire_ns if wire_ns is not None and wire_ns <= recv_ns else None
        self.admit_ns: int | None = None
        self.end_ns: int | None = None
        self.event_ns: list[int] = []
        self.event_tokens: list[int] = []
        self.finish: str | None = None
        self.finish_reason: str | None = None
        self.prompt_tokens = 0
        self.planned_tokens = 0
        self.messages: object = None  # a chat request's messages (MockConfig.record_messages)
        self.answer: str | None = None  # with answers "prompt": the text planned (mock/answers.py)
        self.corrupted_at: int | None = None  # ... and its first corrupted token, if corrupted
        self.constraint: str | None = None  # a structured-output request's kind
        self.honoured: bool | None = None  # ... answered with a whole valid text (not ignored, not cut)
        self.tool_call_id: str | None = None  # answered with a tool call: its id

    def to_dict(self) -> dict:
        return {
            "request_id": self.request_id, "endpoint": self.endpoint, "stream": self.stream,
            "recv_ns": self.recv_ns, "wire_ns": self.wire_ns, "admit_ns": self.admit_ns, "end_ns": self.end_ns,
            "event_ns": list(self.event_ns), "event_tokens": list(self.event_tokens),
            "finish": self.finish, "finish_reason": self.finish_reason,
            "prompt_tokens": self.prompt_tokens, "planned_tokens": self.planned_tokens,
            "output_tokens": sum(self.event_tokens), "messages": self.messages,
            "answer": self.answer, "corrupted_at": self.corrupted_at,
            "constraint": self.constraint, "honoured": self.honoured,
            "answer": self.answer, "corrupted_at": self.corrupted_at, "tool_call_id": self.tool_call_id,
        }


class TruthLog:
    """All request logs plus every edge of the open-request count."""

    def __init__(self, config_dict: dict) -> None:
        self.config_dict = config_dict
        self.open = 0
        self.reset()

    def reset(self) -> None:
        # In-flight requests keep their (now detached) logs; the open count carries over.
        self.start_ns = perf_counter_ns()
        self.requests: list[RequestLog] = []
        self.received: list[dict] = []  # with keep_requests: method, path, headers, body of each
        self.open_t: list[int] = [self.start_ns]
        self.open_n: list[int] = [self.open]

    def begin(self, log: RequestLog) -> None:
        self.requests.append(log)
        self.open += 1
        # Requests pipelined in one read share a recv time, possibly before the end of
        # the one served just ahead; keep the edges in time order for ``mean_open``.
        self.open_t.append(max(log.wire_ns or log.recv_ns, self.open_t[-1]))
        self.open_n.append(self.open)

    def end(self, log: RequestLog, t_ns: int, finish: str) -> None:
        if log.finish is not None:
            return
        log.finish, log.end_ns = finish, t_ns
        self.open -= 1
        self.open_t.append(t_ns)
        self.open_n.append(self.open)

    def to_dict(self) -> dict:
        return {
            "clock": "perf_counter_ns", "config": self.config_dict, "start_ns": self.start_ns,
            "requests": [r.to_dict() for r in self.requests],
            "open": {"t_ns": list(self.open_t), "n": list(self.open_n)}, "received": list(self.received),
        }

    def snapshot(self) -> Truth:
        return Truth.from_dict(self.to_dict())


@dataclass(frozen=True, slots=True)
class RequestTruth:
    request_id: str
    endpoint: str
    stream: bool
    recv_ns: int
    admit_ns: int | None
    end_ns: int | None
    event_ns: tuple[int, ...]
    event_tokens: tuple[int, ...]
    finish: str | None
    finish_reason: str | None
    prompt_tokens: int
    planned_tokens: int
    output_tokens: int
    wire_ns: int | None = None
    messages: list | None = None  # recorded only with MockConfig.record_messages
    answer: str | None = None  # with answers "prompt": the text planned for the request
    corrupted_at: int | None = None  # ... its first corrupted token (None: not corrupted)
    constraint: str | None = None  # a structured-output request's kind (json, regex, choice)
    honoured: bool | None = None  # ... whether its answer was a whole valid text
    tool_call_id: str | None = None  # answered with a tool call: its id

    @property
    def arrived_ns(self) -> int:
        """When the request reached the server: the kernel's stamp where there is one."""
        return self.recv_ns if self.wire_ns is None else self.wire_ns

    @property
    def ttft_ns(self) -> int | None:
        """First content write − arrival (includes the mock's own delay in reading the
        request and any wait for a ``max_open`` slot: time the client really waited)."""
        return self.event_ns[0] - self.arrived_ns if self.event_ns else None

    @property
    def itl_ns(self) -> tuple[int, ...]:
        """Gaps between consecutive content writes."""
        e = self.event_ns
        return tuple(b - a for a, b in zip(e, e[1:]))


@dataclass(frozen=True, slots=True)
class Truth:
    config: dict
    start_ns: int
    requests: tuple[RequestTruth, ...]
    open_t_ns: tuple[int, ...]
    open_n: tuple[int, ...]
    received: tuple[dict, ...] = ()  # with keep_requests: what each request carried

    def bodies(self, path: str) -> list[dict]:
        """The JSON bodies received on ``path``, in arrival order."""
        return [json.loads(r["body"]) for r in self.received if r["path"] == path and r["body"]]

    @classmethod
    def from_dict(cls, d: dict) -> Truth:
        reqs = tuple(
            RequestTruth(**{**r, "event_ns": tuple(r["event_ns"]), "event_tokens": tuple(r["event_tokens"])})
            for r in d["requests"]
        )
        return cls(d["config"], d["start_ns"], reqs, tuple(d["open"]["t_ns"]), tuple(d["open"]["n"]),
                   tuple(d.get("received", ())))

    def to_dict(self) -> dict:
        return {
            "clock": "perf_counter_ns", "config": self.config, "start_ns": self.start_ns,
            "requests": [{**asdict(r), "event_ns": list(r.event_ns), "event_tokens": list(r.event_tokens)}
                         for r in self.requests],
            "open": {"t_ns": list(self.open_t_ns), "n": list(self.open_n)}, "received": list(self.received),
        }

    def by_id(self) -> dict[str, RequestTruth]:
        return {r.request_id: r for r in self.requests}


def mean_open(truth: Truth, start_ns: int, end_ns: int) -> float:
    """Time-weighted mean of open requests over [start_ns, end_ns).

    The count is a step function: ``open_n[i]`` holds from ``open_t_ns[i]`` until the
    next edge. mean = Σ n_i · |[t_i, t_{i+1}) ∩ window| / (end − start).
    """
    if end_ns <= start_ns:
        raise ValueError("empty window")
    t, n = truth.open_t_ns, truth.open_n
    area = 0
    for i, count in enumerate(n):
        lo = max(t[i], start_ns)
        hi = min(t[i + 1] if i + 1 < len(t) else end_ns, end_ns)
        if hi > lo:
            area += count * (hi - lo)
    return area / (end_ns - start_ns)


def lateness_ns(req: RequestTruth, ttft_ms: float, itl_ms: float) -> tuple[int, ...]:
    """Write time − scheduled time for each content event of a streamed request:
    event j is due at ``admit + ttft + j·itl``. Positive = the mock fell behind."""
    if req.admit_ns is None or not req.stream:
        return ()
    base = req.admit_ns + round(ttft_ms * 1e6)
    itl = round(itl_ms * 1e6)
    return tuple(t - (base + j * itl) for j, t in enumerate(req.event_ns))


@dataclass(frozen=True, slots=True)
class TruthSummary:
    """Per-request TTFT and pooled ITL over the requests that finished ``ok``."""

    ttft_ns: dict[str, int]
    itl_ns: tuple[int, ...]
    output_tokens: dict[str, int]
    finishes: dict[str, int]
    events: int


def summarize(truth: Truth) -> TruthSummary:
    ok = [r for r in truth.requests if r.finish == "ok"]
    finishes: dict[str, int] = {}
    for r in truth.requests:
        finishes[str(r.finish)] = finishes.get(str(r.finish), 0) + 1
    return TruthSummary(
        ttft_ns={r.request_id: r.ttft_ns for r in ok if r.ttft_ns is not None},
        itl_ns=tuple(g for r in ok for g in r.itl_ns),
        output_tokens={r.request_id: r.output_tokens for r in ok},
        finishes=finishes,
        events=sum(len(r.event_ns) for r in truth.requests),
    )
