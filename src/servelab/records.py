"""Frozen data shapes that flow through the pipeline (layer 0).

Times are integer nanoseconds from ``time.perf_counter_ns()`` (CLOCK_MONOTONIC on
Linux, so comparable across processes on one machine).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class SampleRequest:
    """One request a dataset asks for: the prompt and how long it is.

    ``expected_output_len`` becomes ``max_tokens``; ``None`` lets the server decide.
    ``prompt`` is token ids for a trace replay (vLLM's timed_trace sends ids, so the
    server sees exactly ``prompt_len`` tokens); ``timestamp_s``: the trace's send
    time, seconds from t0 (None: the arrival process decides).
    """

    prompt: str | tuple[int, ...]
    prompt_len: int
    expected_output_len: int | None
    request_id: str
    timestamp_s: float | None = None


@dataclass(frozen=True, slots=True)
class Conversation:
    """A conversation replayed turn by turn: each turn's ``prompt`` is the user's message
    alone (the history is built during the run from the server's actual replies);
    ``prompt_len`` counts that message; ``expected_output_len`` is the turn's max_tokens."""

    conversation_id: str
    turns: tuple[SampleRequest, ...]


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """What happened to one request, as the client saw it.

    intended_ns:   when the load plan said to send it (t0 + offset).
    dispatched_ns: when the pacer released it (intended → dispatched = schedule lag).
    sent_ns:       just before its bytes were written, after a concurrency slot and
                   a connection were had (dispatched → sent = client queue time;
                   this is vLLM's ``st``, where TTFT and E2EL start).
    token_ns:      arrival time of each token-bearing streamed event.
    token_counts:  tokens each of those events carried (all 1 unless a server
                   packs several tokens per event).
    done_ns:       when the response ended (or failed).
    """

    request_id: str
    prompt_len: int
    expected_output_len: int | None
    intended_ns: int
    dispatched_ns: int
    sent_ns: int
    done_ns: int
    token_ns: tuple[int, ...] = ()
    token_counts: tuple[int, ...] = ()
    output_tokens: int = 0
    output_tokens_source: str = "usage"  # "usage" | "tokenizer"
    # "usage": prompt_len is the server's usage.prompt_tokens (as vLLM's client counts);
    # "dataset": the sampler's count, the server reported none
    prompt_len_source: str = "dataset"
    generated_text: str = ""
    error: str | None = None
    http_status: int | None = None
    # a finish_reason or [DONE] ended the stream. A stream that just stops counts as a
    # success (as vLLM's client counts it), but the result says how many did.
    finished: bool = True
    # chat streams of reasoning models: the first event carrying reasoning text, and the
    # first carrying answer text (0: none seen, or no reasoning before it). TTFT above is the
    # earlier of the two.
    first_reasoning_ns: int = 0
    first_answer_ns: int = 0
    # multi-turn runs: which conversation, and which of its turns (0-based); None otherwise
    conversation_id: str | None = None
    turn: int | None = None
    # --traceparent: the W3C trace id sent with it (client/trace.py), to join the engine's spans
    trace_id: str | None = None

    @property
    def success(self) -> bool:
        return self.error is None

    @property
    def ttft_ns(self) -> int:
        return self.token_ns[0] - self.sent_ns if self.token_ns else 0

    @property
    def e2el_ns(self) -> int:
        """Send to the last token-bearing event (not the usage chunk, not [DONE])."""
        return self.token_ns[-1] - self.sent_ns if self.token_ns else self.done_ns - self.sent_ns

    @property
    def queue_ns(self) -> int:
        return self.sent_ns - self.dispatched_ns

    @property
    def lag_ns(self) -> int:
        return self.dispatched_ns - self.intended_ns


class RecordSink(Protocol):
    """Where a run's records go, each once, as it is made: request ``i``'s record, with the
    run's t0 (a records file writes times from it). Implemented by the run's tally and
    records file (results/store.py), by a worker's or a Ray shard's outbox (loadgen), and
    fed by every way a run's load is driven (measure/drivers.py). Whoever makes a sink
    reads what it gathered; a run never hands it back."""

    def add(self, i: int, record: RequestRecord, t0_ns: int) -> None: ...


# How a run ended (RunEnding.reason): a run that ran out of requests is "completed";
# every other reason is an early end, and each is accounted the same way.
# A dead server does not end a run: its requests fail fast and are counted as failed
# (--stop-on-errors / --stop-on-error-rate end it early as "errors" / "error rate").
# "interrupted": a split run that lost a worker or a shard.
END_REASONS = ("completed", "SIGINT", "SIGTERM", "saturated", "errors", "error rate", "disk full",
               "interrupted", "killed (recovered)")


@dataclass(frozen=True, slots=True)
class RunEnding:
    """The one accounting of a run's requests, however it ended (a stop rule, Ctrl-C,
    SIGTERM, a dead server, a full disk, a kill recovered later).

    Every request the run meant to send is exactly one of:
      completed     a record, successful — in the records file and the result's ``completed``;
      failed        a record with an error — in the records file and the result's ``failed``;
      cut           sent (its bytes went out) but never answered (a stop cancelled it in
                    flight, or the run was killed before its record was written): no record,
                    neither a success nor a failure — it measured nothing;
      never_sent    its bytes never went out: the run ended before its turn in the schedule,
                    while it waited for a client concurrency slot, or while it connected (or,
                    in a multi-turn run, an earlier turn of its conversation failed).
    ``meant == completed + failed + cut + never_sent``. The records file has exactly
    ``completed + failed`` record lines and this accounting as its last line, so the file
    and the result say the same. After a hard kill, ``never_sent`` is what the run had not
    sent by its last count in the records file's sidecar (results/recover.py); None (not
    known, every request without a record ``cut``) where there is no count.
    """

    reason: str
    meant: int
    completed: int
    failed: int
    never_sent: int | None

    @property
    def cut(self) -> int:
        return self.meant - self.completed - self.failed - (self.never_sent or 0)

    @property
    def early(self) -> bool:
        return self.reason != "completed"

    def to_dict(self) -> dict:
        return {"reason": self.reason, "early": self.early, "meant": self.meant, "completed": self.completed,
                "failed": self.failed, "cut": self.cut, "never_sent": self.never_sent}
