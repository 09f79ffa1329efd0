"""Bytes per weight and per KV element, by quantization and cache dtype.

Bits per weight include the scales a format stores beside its values:
GGUF block formats from ggml's block structs (Q4_0: 32 4-bit values + one fp16
scale = 18 bytes → 4.5 bits; Q4_1 adds an fp16 minimum → 20 bytes, 5.0 bits;
Q8_0: 32 bytes + scale = 34 → 8.5; k-quants per 256-value super-block:
Q4_K 144 B, Q5_K 176 B, Q6_K 210 B, Q3_K 110 B, Q2_K 84 B).
AWQ/GPTQ at 4 bits, group 128: a 16-bit scale and a 4-bit zero per group →
4 + 20/128 bits. fp8/int8: one byte, per-channel scales negligible.
vLLM keeps the embedding and LM head of an AWQ/GPTQ/fp8/int8 checkpoint in 16 bits
(they are not Linear layers the quantizer touches); GGUF quantizes them too.
"""

from __future__ import annotations

from fractions import Fraction

# quantization -> bits per quantized weight (exact fractions, so byte counts stay integers)
WEIGHT_BITS: dict[str, Fraction] = {
    "none": Fraction(16), "bf16": Fraction(16), "fp16": Fraction(16), "fp32": Fraction(32),
    "fp8": Fraction(8), "int8": Fraction(8), "w8a8": Fraction(8),
    "awq": 4 + Fraction(20, 128), "gptq": 4 + Fraction(20, 128), "int4": 4 + Fraction(20, 128),
    "F32": Fraction(32), "F16": Fraction(16), "BF16": Fraction(16),
    "Q8_0": Fraction(34 * 8, 32), "Q5_0": Fraction(22 * 8, 32), "Q5_1": Fraction(24 * 8, 32),
    "Q4_0": Fraction(18 * 8, 32), "Q4_1": Fraction(20 * 8, 32),
    "Q6_K": Fraction(210 * 8, 256), "Q5_K": Fraction(176 * 8, 256), "Q5_K_M": Fraction(176 * 8, 256),
    "Q4_K": Fraction(144 * 8, 256), "Q4_K_M": Fraction(144 * 8, 256),
    "Q3_K": Fraction(110 * 8, 256), "Q2_K": Fraction(84 * 8, 256),
}
# Formats that leave the embedding and LM head at 16 bits.
KEEPS_EMBEDDINGS = {"awq", "gptq", "int4", "fp8", "int8", "w8a8"}
FP8_COMPUTE = {"fp8"}
# GGUF block-quantized types (F16/BF16/F32 files are plain).
GGUF_QUANTIZED = {name for name in WEIGHT_BITS if name[0] == "Q"}
GGUF_FLOATS = {"F16", "BF16"}  # GGUF's spelling; vLLM's is bf16/fp16

# --kv-cache-dtype (vLLM) / --cache-type-k (llama.cpp) -> bytes per element
KV_BYTES: dict[str, Fraction] = {
    "bf16": Fraction(2), "fp16": Fraction(2), "f16": Fraction(2), "half": Fraction(2), "float16": Fraction(2),
    "bfloat16": Fraction(2), "fp32": Fraction(4), "f32": Fraction(4), "float32": Fraction(4),
    "fp8": Fraction(1), "fp8_e4m3": Fraction(1), "fp8_e5m2": Fraction(1),
    "q8_0": Fraction(34, 32), "q4_0": Fraction(18, 32), "q4_1": Fraction(20, 32),
    "q5_0": Fraction(22, 32), "q5_1": Fraction(24, 32),
}


def weight_bits(quantization: str) -> Fraction | None:
    """Bits per weight for a quantization name (GGUF types in any case), or None if unknown."""
    return WEIGHT_BITS.get(quantization) or WEIGHT_BITS.get(quantization.upper()) \
        or WEIGHT_BITS.get(quantization.lower())


def kv_element_bytes(kv_cache_dtype: str, model_dtype_bytes: int) -> Fraction | None:
    """Bytes per cached K or V value; "auto" follows the model's dtype, as in vLLM."""
    if kv_cache_dtype == "auto":
        return Fraction(model_dtype_bytes)
    return KV_BYTES.get(kv_cache_dtype.lower())
