"""A response as a ``RequestRecord``: its stream parsed, its tokens counted (the server's
``usage``, else the tokenizer, else the events), its events' token shares, its failure
said in one line. Done off the clock (loadgen/digest.py), or as a turn ends (multi-turn)."""

from __future__ import annotations

import numpy as np

from servelab.client import openai, trace
from servelab.client.sse import parse_events
from servelab.loadgen.pacer import Attempt
from servelab.records import RequestRecord, SampleRequest

CUT = "interrupted before completion"


def to_record(kind: str, sample: SampleRequest, a: Attempt, tokenizer, trace_seed: int | None = None) -> RequestRecord:
    """``trace_seed``: the run's seed when it sent a traceparent (--traceparent): the record keeps its trace id."""
    # a request refused before its bytes went out (a dead server) has no send time: it
    # failed where it was released, so it counts once, as a failure, like any other
    base = dict(request_id=sample.request_id, prompt_len=sample.prompt_len,
                expected_output_len=sample.expected_output_len, intended_ns=a.intended_ns,
                dispatched_ns=a.dispatched_ns, sent_ns=a.sent_ns or a.dispatched_ns,
                trace_id=None if trace_seed is None else trace.trace_id(trace_seed, sample.request_id))
    resp = a.response
    if resp is None:  # cut in flight (multi-turn keeps its attempts; the digest never sees one)
        return RequestRecord(**base, done_ns=a.sent_ns, error=CUT)
    if resp.error:
        return RequestRecord(**base, done_ns=resp.done_ns, error=resp.error, http_status=resp.status or None)
    if resp.status != 200:
        err = openai.http_error(resp.status, resp.reason, resp.body())
        return RequestRecord(**base, done_ns=resp.done_ns, error=err, http_status=resp.status)
    stream = openai.interpret(kind, parse_events(resp.reads))
    error = stream.error or _stream_problem(stream, resp.closed_early)
    text = "".join(stream.texts)
    n_out, source = _output_tokens(stream, text, tokenizer)
    if stream.prompt_tokens is not None:  # the server's count, as vLLM's client takes it
        base.update(prompt_len=int(stream.prompt_tokens), prompt_len_source="usage")
    return RequestRecord(
        **base, done_ns=resp.done_ns, token_ns=stream.token_ns,
        token_counts=split_counts(stream.texts, n_out, tokenizer), output_tokens=n_out,
        output_tokens_source=source, generated_text=text, error=error, http_status=200,
        finished=stream.finished, first_reasoning_ns=stream.first_reasoning_ns,
        # an answer's instant says something only after reasoning; left at its default
        # otherwise, a plain stream keeps nothing per request outside the tally's columns
        first_answer_ns=stream.first_answer_ns if stream.first_reasoning_ns else 0)


def _stream_problem(stream: openai.Stream, closed_early: bool) -> str | None:
    if not stream.token_ns:
        return "no token-bearing event received (cannot measure TTFT)"
    if closed_early and not stream.finished:
        return "connection closed mid-stream"
    return None


def _output_tokens(stream: openai.Stream, text: str, tokenizer) -> tuple[int, str]:
    if stream.completion_tokens is not None:
        return int(stream.completion_tokens), "usage"
    if tokenizer is not None:
        return len(tokenizer.encode(text)), "tokenizer"
    return len(stream.token_ns), "events"


def split_counts(texts: tuple[str, ...], total: int, tokenizer) -> tuple[int, ...]:
    """Tokens carried by each event. One each when events and tokens agree (the
    usual case); otherwise shares proportional to each event's re-tokenized
    length, rounded so they sum to ``total``."""
    n = len(texts)
    if n == 0 or total <= n:
        return (1,) * n
    weights = np.array([max(1, len(tokenizer.encode(t))) if tokenizer else 1 for t in texts], dtype=float)
    exact = weights / weights.sum() * total
    counts = np.maximum(1, np.floor(exact)).astype(int)
    for j in np.argsort(-(exact - np.floor(exact)))[: max(0, total - int(counts.sum()))]:
        counts[j] += 1
    return tuple(int(c) for c in counts)
