"""Pre-launch fit checks: the model's limits and the KV budget an earlier start reported."""

import pytest

from servelab.search.fit import Budget, Settings, kv_tokens, misfit

CPU = Budget(kv_cache_tokens=46_592, kv_cache_gib=1.0, model="m")


def test_max_model_len_above_the_models_own_is_skipped():
    assert misfit(Settings(max_model_len=16384, model_max_len=8192, model="m"), None) == \
        "max-model-len 16384 is above the model's 8192"
    assert misfit(Settings(max_model_len=4096, model_max_len=8192, model="m"), None) is None


def test_chunked_prefill_off_needs_a_whole_prompt_per_step():
    s = Settings(max_model_len=4096, chunked_prefill=False, max_num_batched_tokens=2048, model="m")
    assert "2048 < 4096" in misfit(s, None)
    assert misfit(Settings(max_model_len=4096, max_num_batched_tokens=2048, model="m"), None) is None


def test_one_request_must_fit_in_the_kv_blocks():
    # 46,592 tokens: max-model-len 8192 fits; 65,536 does not
    assert misfit(Settings(max_model_len=8192, model="m"), CPU) is None
    why = misfit(Settings(max_model_len=65_536, model_max_len=131_072, model="m"), CPU)
    assert why == ("one request of max-model-len 65536 tokens needs 4096 blocks of 16; "
                   "the KV cache holds ≈2912 (46,592 tokens)")


def test_block_size_rounds_the_budget_down():
    tight = Budget(kv_cache_tokens=1000, model="m")
    assert misfit(Settings(max_model_len=960, block_size=16, model="m"), tight) is None  # 62 × 16 = 992
    assert "holds ≈1 (512 tokens)" in misfit(Settings(max_model_len=960, block_size=512, model="m"), tight)


def test_memory_utilization_scales_the_kv_budget_on_a_gpu():
    gpu = Budget(kv_cache_tokens=100_000, kv_cache_gib=10.0, gpu_memory_utilization=0.9, device_gib=80.0, model="m")
    assert kv_tokens(Settings(gpu_memory_utilization=0.8, model="m"), gpu) == pytest.approx(20_000)  # 2 GiB left
    assert "leaves no KV cache" in misfit(Settings(gpu_memory_utilization=0.75, max_model_len=10, model="m"), gpu)
    assert "needs" in misfit(Settings(gpu_memory_utilization=0.8, max_model_len=32_768, model="m"), gpu)
    # without the device's size nothing is estimated
    blind = Budget(kv_cache_tokens=100_000, kv_cache_gib=10.0, gpu_memory_utilization=0.9, model="m")
    assert kv_tokens(Settings(gpu_memory_utilization=0.5, model="m"), blind) == 100_000


def test_another_model_or_kv_dtype_is_not_judged_by_this_budget():
    assert misfit(Settings(max_model_len=65_536, model="awq"), CPU) is None
    assert misfit(Settings(max_model_len=65_536, model="m", kv_cache_dtype="fp8"), CPU) is None
