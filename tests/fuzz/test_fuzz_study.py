"""Generated study files (fields of the wrong type, unknown fields, cut short) through
study/file.py: a study, or one line naming the file and the field."""

from __future__ import annotations

import tempfile
from pathlib import Path

from fuzz_cases import check_study_file, study_files
from hypothesis import given


@given(study_files())
def test_any_study_file_is_loaded_or_refused_in_one_line(text):
    with tempfile.TemporaryDirectory() as folder:
        check_study_file(Path(folder), text)
