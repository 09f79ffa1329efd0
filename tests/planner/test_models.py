"""The model table: parameter counts from the shape match the published ones."""

import pytest

from servelab.planner.models import MODELS, find_model


@pytest.mark.parametrize("name, params", [
    ("meta-llama/Llama-3.1-8B-Instruct", 8_030_261_248),   # exact, from its safetensors index
    ("HuggingFaceTB/SmolLM2-135M-Instruct", 134_515_008),  # llama.cpp: "model params = 134.52 M"
])
def test_exact_parameter_counts(name, params):
    assert MODELS[name].total_params == params


@pytest.mark.parametrize("name, billions", [
    ("Qwen/Qwen3-14B", 14.8), ("Qwen/Qwen2.5-7B-Instruct", 7.6), ("google/gemma-2-9b-it", 9.2),
    ("microsoft/phi-4", 14.7), ("mistralai/Mixtral-8x7B-Instruct-v0.1", 46.7), ("Qwen/Qwen3-30B-A3B", 30.5),
])
def test_published_sizes_to_the_first_decimal(name, billions):
    assert round(MODELS[name].total_params / 1e9, 1) == billions


def test_moe_reads_only_the_routed_experts():
    assert round(find_model("Qwen3-30B-A3B").active / 1e9, 1) == 3.4  # published "3.3B activated"
    assert round(find_model("Mixtral-8x7B-Instruct-v0.1").active / 1e9, 1) == 12.9


def test_find_model_by_short_name_any_case():
    assert find_model("qwen3-14b") is MODELS["Qwen/Qwen3-14B"]
    assert find_model("QWEN/QWEN3-14B") is MODELS["Qwen/Qwen3-14B"]
    assert find_model("Qwen3-15B") is None


def test_the_table_covers_the_families_asked_for():
    names = " ".join(MODELS).lower()
    for family in ("llama-3.1", "llama-3.2", "qwen2.5", "qwen3-30b-a3b", "mistral", "mixtral", "gemma-2",
                   "gemma-3", "phi-3", "phi-4", "deepseek-v2", "deepseek-v3", "smollm2"):
        assert family in names, family


@pytest.mark.parametrize("name, sizes", [
    ("Qwen/Qwen3-8B", [1, 2, 4, 8, 16, 32]),                        # 32 heads, 8 KV heads: no 3
    ("microsoft/Phi-3-medium-4k-instruct", [1, 2, 5, 10, 20, 40]),  # 40 heads, 10 KV heads: 4 and 8 split q, not kv
    ("Qwen/Qwen2.5-7B-Instruct", [1, 2, 4, 28]),                    # 28 heads, 4 KV: 7 and 14 not multiples of 4
])
def test_tensor_parallel_sizes_vllm_accepts(name, sizes):
    from servelab.planner.models import tensor_parallel_sizes

    assert tensor_parallel_sizes(MODELS[name]) == sizes
