"""KV-cache arithmetic, as vLLM (v1, 0.32) does it.

- Bytes per token per layer (``AttentionSpec.page_size_bytes`` / block_size,
  vllm/v1/kv_cache_interface.py): 2 (K and V) × KV heads on this GPU × head dim × dtype bytes.
  KV heads on one GPU = max(1, kv_heads // tensor_parallel) (``ModelConfig.get_num_kv_heads``,
  vllm/config/model.py: heads are replicated when there are fewer than GPUs).
  MLA (``MLAAttentionSpec``): one latent of kv_lora_rank + qk_rope_head_dim values, no
  factor 2, not split across GPUs (get_num_kv_heads returns 1 for MLA).
- The pool holds whole blocks: num_blocks = available_bytes // (page bytes × layers)
  (``get_kv_cache_config_from_groups``, vllm/v1/core/kv_cache_utils.py).
- Maximum concurrency = num_blocks / cdiv(max_model_len, block_size), and the logged
  "KV cache size: N tokens" = int(concurrency × max_model_len)
  (``get_max_concurrency_for_kv_cache_config`` and ``get_kv_cache_capacity``, same file).
  When max_model_len is a multiple of the block size, N = num_blocks × block_size.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from servelab.planner.models import ModelShape


def kv_heads_per_gpu(model: ModelShape, tensor_parallel: int) -> int:
    return 1 if model.mla else max(1, model.kv_heads // tensor_parallel)


def kv_bytes_per_token(model: ModelShape, element_bytes: Fraction, tensor_parallel: int = 1) -> Fraction:
    """All layers' KV for one token on one GPU (Qwen3-14B, bf16: 2×40×8×128×2 = 163,840 = 160 KiB)."""
    if model.mla:
        return model.layers * (model.kv_lora_rank + model.qk_rope_head_dim) * element_bytes
    return 2 * model.layers * kv_heads_per_gpu(model, tensor_parallel) * model.head_dim * element_bytes


@dataclass(frozen=True, slots=True)
class KvPool:
    """What vLLM makes of a KV budget: whole blocks, the tokens and requests they hold."""

    available_bytes: int
    block_size: int
    bytes_per_block: int
    num_blocks: int
    tokens: int
    max_concurrency: float
    max_model_len: int


def kv_pool(available_bytes: int, bytes_per_token: Fraction, block_size: int, max_model_len: int) -> KvPool:
    bytes_per_block = int(bytes_per_token * block_size)
    num_blocks = max(0, available_bytes) // bytes_per_block
    blocks_per_request = -(-max_model_len // block_size)
    concurrency = Fraction(num_blocks, blocks_per_request)
    return KvPool(available_bytes, block_size, bytes_per_block, num_blocks,
                  int(concurrency * max_model_len), float(concurrency), max_model_len)
