"""How many bytes each engine gives the KV cache.

vLLM on a GPU (``Worker.determine_available_memory``, vllm/v1/worker/gpu_worker.py):
    requested  = ceil(total × gpu_memory_utilization)      (``request_memory``, vllm/v1/worker/utils.py)
    KV budget  = requested − non-KV memory − CUDA-graph estimate
    non-KV     = weights + peak activations of a profile run + non-torch memory (``memory_profiling``)
The weights are exact arithmetic; the rest is measured by vLLM at startup and modelled here
(``OtherMemory``, planner/nonkv.py, fitted on published startup logs), which is where a GPU
prediction can miss; docs/planner_accuracy.md says by how much.

vLLM's CPU build (``CpuPlatform.check_and_update_config``, vllm/platforms/cpu.py):
    KV budget = VLLM_CPU_KVCACHE_SPACE (whole GiB) × 2**30, block size 128 (16 for MLA).

llama.cpp (``llama_kv_cache``): one cell per token of ``n_ctx`` (when 0: the model's trained
context per slot), K and V for every layer at ``--cache-type-k/-v`` (f16 by default);
the slots (``--parallel``) split the cells, ``n_ctx_slot = n_ctx / n_parallel``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from servelab.planner.models import ModelShape
from servelab.planner.nonkv import NonKvConstants, activation_bytes, fitted_constants, non_torch_bytes

GIB = 2**30
CPU_BLOCK_SIZE, GPU_BLOCK_SIZE, CPU_MLA_BLOCK_SIZE = 128, 16, 16


@dataclass(frozen=True, slots=True)
class OtherMemory:
    """What vLLM's profile run finds beside the weights, per GPU (bytes).

    activations: the profile run's transient peak: one forward pass over ``max_num_batched_tokens``
    tokens and the sampler over ``max_num_seqs`` requests (planner/nonkv.py).
    non_torch: CUDA context, cuBLAS workspaces, NCCL buffers (more with tensor parallel).
    cuda_graphs: the CUDA-graph pool vLLM estimates and subtracts; zero with --enforce-eager.
    """

    activations: int
    non_torch: int
    cuda_graphs: int

    @property
    def total(self) -> int:
        return self.activations + self.non_torch + self.cuda_graphs


def estimate_other(model: ModelShape, batched_tokens: int, num_seqs: int, tensor_parallel: int,
                   enforce_eager: bool = False, constants: NonKvConstants | None = None) -> OtherMemory:
    """vLLM's non-KV memory beside the weights (planner/nonkv.py: the model, its vLLM sources and
    the constants fitted on the corpus)."""
    c = constants or fitted_constants()
    graphs = 0 if enforce_eager else int(c.cuda_graph_gib * GIB)
    return OtherMemory(activation_bytes(model, batched_tokens, num_seqs, tensor_parallel, c),
                       non_torch_bytes(tensor_parallel, c), graphs)


def requested_bytes(total_bytes: int, utilization: float) -> int:
    """What vLLM may use of one GPU: weights, other memory and the KV cache fill exactly this."""
    return math.ceil(total_bytes * utilization)


def vllm_gpu_budget(total_bytes: int, utilization: float, weights_per_gpu: int, other: OtherMemory) -> int:
    """Bytes left for the KV cache on one GPU (negative: the model does not fit)."""
    return requested_bytes(total_bytes, utilization) - weights_per_gpu - other.total


def vllm_cpu_budget(kvcache_space_gib: int) -> int:
    return kvcache_space_gib * GIB


def llamacpp_cells(model: ModelShape, n_ctx: int, parallel: int = 1) -> int:
    """llama.cpp's KV cells: ``--ctx-size``; when 0, the model's trained context for every slot
    (seen here: ``--parallel 2`` alone gave n_ctx 16384, ``n_ctx_slot = 8192``)."""
    return n_ctx or model.max_position * parallel


def llamacpp_kv_bytes(cells: int, bytes_per_token: Fraction) -> int:
    return int(cells * bytes_per_token)
