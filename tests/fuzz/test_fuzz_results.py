"""Generated result and records files (fields of the wrong type, cut short, not UTF-8)
through results/runs.py's readers: every field answers, or one line names the file."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from fuzz_cases import a_result, check_result_files, result_files
from hypothesis import example, given

GOOD = json.dumps(a_result()).encode()


# tracebacks Hypothesis found, each fixed in results/runs.py and kept here
@example((GOOD, b"\xff\xfe"))  # a records line cut inside a UTF-8 character
@example((GOOD, b"[1]\n5\n"))  # records lines that are not objects
@example((json.dumps({**a_result(), "servelab": [1]}).encode(), b""))
@example((json.dumps({**a_result(), "servelab": {"engine": "vllm", "records_file": 5}}).encode(), b""))
@example((json.dumps({**a_result(), "servelab": {"provenance": {"server_models": {"data": 3}}}}).encode(), b""))
@example((json.dumps({**a_result(), "servelab": {"engine": {"memory_report": [1]}}}).encode(), b""))
@given(result_files())
def test_any_result_file_is_read_or_refused_in_one_line(files):
    with tempfile.TemporaryDirectory() as folder:
        check_result_files(Path(folder), *files)
