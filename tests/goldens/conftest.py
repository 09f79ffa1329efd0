"""What every golden test here shares: goldens regenerated fail their test, and each test runs
in an empty folder whose path (and the tokenizer's) is masked in what is compared."""

from __future__ import annotations

import pytest
from golden_io import fail_if_regenerated


@pytest.fixture(autouse=True)
def regenerated():
    """With SERVELAB_REGEN_GOLDEN=1 a test writes all its goldens, then fails."""
    yield
    fail_if_regenerated()


@pytest.fixture
def where(tmp_path, qwen3_path, monkeypatch):
    """Run in an empty folder; mask it and the tokenizer's path in what is compared."""
    monkeypatch.chdir(tmp_path)
    return {"tmp": tmp_path, "tok": qwen3_path, "literals": {str(tmp_path): "<TMP>", qwen3_path: "<TOKENIZER>"}}
