"""Generated dataset files (custom JSONL, ShareGPT JSON, timed_trace JSONL, BurstGPT CSV:
fields missing or of the wrong type, cut short, not UTF-8) through datasets/: requests, or
one line naming the file. Counted by fuzz_cases.ByteTokenizer (why: its docstring)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from fuzz_cases import ByteTokenizer, check_dataset_file, dataset_files
from hypothesis import example, given

TRACE = b'{"input_length": %s, "output_length": %s, "timestamp": %s}\n'
BURST = b"Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n1,GPT-4,%s,%s,3,x\n"


# what Hypothesis found, each fixed in datasets/ and kept here
@example(("timed_trace", TRACE % (b"Infinity", b"4", b"0.5")))  # OverflowError
@example(("timed_trace", TRACE % (b"5", b"-4", b"NaN")))  # a negative length accepted
@example(("timed_trace", b'{"\\n": null}\n'))  # a field name with a newline: a message on two lines
@example(("burstgpt", BURST % (b"inf", b"5")))  # OverflowError
@example(("burstgpt", BURST % (b"-3", b"5")))  # a negative prompt length accepted
@given(dataset_files())
def test_any_dataset_file_is_requests_or_refused_in_one_line(case):
    with tempfile.TemporaryDirectory() as folder:
        check_dataset_file(Path(folder), *case, ByteTokenizer())
