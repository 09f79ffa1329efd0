"""Generated SSE streams (split at any byte, not UTF-8, huge events, missing fields, wrong
types) through client/sse.py and client/openai.py into a request's record: never a
traceback; a stream that cannot be read is a failed request with its reason (fuzz_cases)."""

from __future__ import annotations

from fuzz_cases import check_stream, streams
from hypothesis import example, given


# tracebacks Hypothesis found, each fixed in client/openai.py (_shape_problem) and kept here
@example(("completions", b'data: {"choices": [null], "usage": {"completion_tokens": 3}}\n\n', []))
@example(("chat", b'data: {"choices": [{"delta": "tok"}]}\n\n', [7]))
@example(("completions", b'data: {"choices": [{"text": 5}]}\n\n', []))
@example(("completions", b'data: {"choices": [{"text": "a"}], "usage": {"completion_tokens": "3"}}\n\n', [3]))
@example(("completions", b'data: {"choices": [{"text": "a"}], "usage": [1]}\n\n', []))
@given(streams())
def test_any_stream_is_a_record_measured_or_failed_with_its_reason(case):
    check_stream(*case)
