"""The live panel's glance: TTFT and output tokens read off raw responses without parsing them,
the same as the records made from them after the run."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from servelab.loadgen.hooks import Hooks
from servelab.client.http import Response
from servelab.config import LoadSpec
from servelab.loadgen.digest import Digest
from servelab.loadgen.drive import run_bench
from servelab.loadgen.values import BenchConfig
from servelab.loadgen.glance import FAILED, OK, Glance, output_tokens
from servelab.loadgen.loop import loop_run
from servelab.loadgen.pacer import Attempt, Counters
from servelab.results.store import RecordSink
from servelab.metrics.tally import Tally
from servelab.selftest.fidelity import synthetic_requests


def _event(payload: str) -> bytes:
    return f"data: {payload}\n\n".encode()


TOKEN = _event('{"id":"c","choices":[{"index":0,"text":"hi","finish_reason":null}]}')
USAGE = _event('{"id":"c","choices":[],"usage":{"prompt_tokens":6,"total_tokens":13,"completion_tokens":7}}')
DONE = b"data: [DONE]\n\n"


def attempt(reads, status=200, error=None, index=0, sent_ns=1_000_000) -> Attempt:
    return Attempt(index, 0, 0, sent_ns, Response(status=status, reads=reads, error=error, done_ns=9_000_000))


def test_ttft_is_the_first_piece_with_choices_and_tokens_the_usage_block():
    glance = Glance(1)
    # a first piece with no event that has choices (a comment) does not start the clock
    glance.note(attempt([(2_000_000, b": ping\n\n"), (3_500_000, TOKEN), (4_000_000, TOKEN + USAGE[:20]),
                         (5_000_000, USAGE[20:] + DONE)]))
    assert glance.state[0] == OK and glance.ttft_ms[0] == pytest.approx(2.5)
    assert glance.tokens[0] == 7  # the usage block, found across the piece it was split at


def test_a_chat_streams_role_announcement_alone_does_not_start_the_clock():
    role = _event('{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}')
    token = _event('{"id":"c","choices":[{"index":0,"delta":{"content":"hi"}}]}')
    glance = Glance(2)
    glance.note(attempt([(2_000_000, role), (4_000_000, token + USAGE)], index=0))
    glance.note(attempt([(3_000_000, role + token), (4_000_000, USAGE)], index=1))  # in one piece: counts
    assert list(glance.ttft_ms) == [pytest.approx(3.0), pytest.approx(2.0)]
    assert output_tokens([(1, role + token), (2, token + DONE)]) == 2  # without usage: the role is no token


def test_without_usage_each_event_with_choices_is_a_token():
    assert output_tokens([(1, TOKEN * 3), (2, TOKEN + DONE)]) == 4
    spaced = _event('{"choices": [{"index": 0, "text": "a"}]}')  # a server writing JSON with spaces
    assert output_tokens([(1, spaced * 2)]) == 2


@pytest.mark.parametrize("response", [dict(status=500, reads=[(2, b'{"error":"x"}')]),
                                      dict(error="connection refused", reads=[]),
                                      dict(reads=[(2, DONE)])])  # no token-bearing event
def test_failed_answers_are_marked_failed(response):
    glance = Glance(1)
    glance.note(attempt(**response))
    assert glance.state[0] == FAILED
    seen, ok, _, _ = glance.columns()
    assert seen == 1 and len(ok) == 0


def test_the_digest_shows_every_response_even_those_the_run_ended_before_weighing():
    glance = Glance(3)
    digest = Digest(lambda a: a.index, lambda i, r: None, glance=glance)
    digest.push(attempt([(2_000_000, TOKEN + USAGE)], index=0))
    digest._weigh()
    digest.push(attempt([(3_000_000, TOKEN + USAGE)], index=2))  # pushed, never weighed by the task
    assert list(glance.state) == [OK, 0, 0]
    digest.flush()
    assert list(glance.state) == [OK, 0, OK]


@pytest.mark.parametrize("kind, endpoint", [("completions", "/v1/completions"),
                                            ("chat", "/v1/chat/completions")])
def test_against_the_mock_the_glance_agrees_with_the_records(mock_server, kind, endpoint):
    mock = mock_server(ttft_ms=15, itl_ms=2)
    samples = synthetic_requests(24, 12)
    config = BenchConfig(base_url=mock.url, endpoint=endpoint, kind=kind, model="mock",
                         load=LoadSpec(max_concurrency=8), ignore_eos=True)
    sink, glance = RecordSink(Tally(samples)), Glance(len(samples))
    loop_run(run_bench(config, samples, None, asyncio.Event(), Counters(), sink=sink, hooks=Hooks(glance=glance)))
    records = sink.tally.records()
    assert all(r.success for r in records) and np.all(glance.state == OK)
    for i, r in enumerate(records):
        assert glance.tokens[i] == r.output_tokens == 12
        # float32 ms: well under a microsecond at these sizes
        assert glance.ttft_ms[i] == pytest.approx((r.token_ns[0] - r.sent_ns) / 1e6, abs=1e-3)
