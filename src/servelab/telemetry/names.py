"""Engine metric names, as data: which exposed name feeds which timeline field.

Each field lists its candidates newest first; the first one the server exposes
wins, and the timeline's header records which (so a result says "KV usage from
vllm:gpu_cache_usage_perc" when it came from an old server). Names are the
*exposed* ones: prometheus_client adds ``_total`` to counters, and
``_sum``/``_count``/``_bucket`` to histograms.

A candidate is a name, or a name and the labels a sample must carry.
Sources: vLLM 0.32's ``v1/metrics/loggers.py`` (older names from the V0 and
early-V1 loggers, kept for servers still running them) and llama.cpp's server
(``llamacpp:*``, only with ``--metrics``).
"""

from __future__ import annotations

Candidate = str | tuple[str, dict[str, str]]

# Gauges: the server's state at the moment of the scrape.
GAUGES: dict[str, tuple[Candidate, ...]] = {
    # vLLM: requests in the model's batch. llama.cpp: slots busy with a request.
    "running": ("vllm:num_requests_running", "llamacpp:requests_processing"),
    # vLLM: admitted by the API server but not yet scheduled. llama.cpp: requests
    # "deferred" because every slot was busy — the same idea, a queue.
    "waiting": ("vllm:num_requests_waiting", "llamacpp:requests_deferred"),
    # Newer vLLM (0.32 has it) splits the queue by reason; "capacity" = no room in the batch
    # or the KV cache, as opposed to "deferred" (LoRA budget, KV transfer).
    "waiting_capacity": (("vllm:num_requests_waiting_by_reason", {"reason": "capacity"}),),
    # A 0–1 fraction despite "perc" in the name. Older vLLM (V0, early V1) called it
    # gpu_cache_usage_perc (also a fraction; "gpu" even on CPU builds). llama.cpp
    # dropped its kv_cache_usage_ratio in 2025: current servers report no KV usage.
    "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "llamacpp:kv_cache_usage_ratio"),
    # V0 only: requests whose KV blocks were swapped to CPU memory (V1 recomputes instead).
    "swapped": ("vllm:num_requests_swapped",),
    # V0 only: a hit-rate gauge instead of the query/hit counters below.
    "prefix_hit_rate_gauge": ("vllm:gpu_prefix_cache_hit_rate",),
}

# Counters: only their increase during the run means anything.
COUNTERS: dict[str, tuple[Candidate, ...]] = {
    # Same exposed name in V0 and V1 (the counter is "vllm:num_preemptions").
    "preemptions": ("vllm:num_preemptions_total",),
    # llama.cpp's excludes tokens reused from its prompt cache (its HELP text says so).
    "prompt_tokens": ("vllm:prompt_tokens_total", "llamacpp:prompt_tokens_total"),
    # llama.cpp adds a request's tokens when it finishes (seen: 0 while two requests
    # were generating), so its rate arrives in lumps; vLLM counts every step.
    "generation_tokens": ("vllm:generation_tokens_total", "llamacpp:tokens_predicted_total"),
    # In tokens, not requests. Early V1 releases prefixed them with "gpu_".
    "prefix_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    # Prompt tokens served from a cache rather than computed (llama.cpp: its prompt cache).
    "prompt_tokens_cached": ("vllm:prompt_tokens_cached_total", "llamacpp:prompt_tokens_cached_total"),
    # A histogram whose own name ends in "_total", so its series read "_total_sum".
    # sum/count = mean tokens per engine step, to compare with max_num_batched_tokens.
    "iteration_tokens_sum": ("vllm:iteration_tokens_total_sum",),
    "iteration_tokens_count": ("vllm:iteration_tokens_total_count",),
    # Summed over finished_reason (stop, length, abort, …).
    "requests_finished": ("vllm:request_success_total",),
    # llama.cpp: one per llama_decode call, its nearest thing to an engine step.
    "decode_calls": ("llamacpp:n_decode_total",),
}

# How label sets of one name combine. Default: sum (one series per engine of a
# data-parallel deployment, or per finished_reason). A usage fraction is averaged.
MEAN_FIELDS = frozenset({"kv_usage", "prefix_hit_rate_gauge"})

# vLLM exports its CacheConfig as the labels of a gauge fixed at 1.
CACHE_CONFIG_INFO = "vllm:cache_config_info"
CACHE_CONFIG_LABELS = ("block_size", "num_gpu_blocks", "kv_cache_size_tokens", "cache_dtype",
                       "enable_prefix_caching", "gpu_memory_utilization")
