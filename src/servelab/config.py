"""User-facing specs (layer 0): plain frozen values built from flags or files.

Defaults follow ``vllm bench serve`` so the same flags mean the same traffic.
"""

from __future__ import annotations

from dataclasses import dataclass

DATASET_NAMES = ("sharegpt", "random", "prefix_repetition", "custom")


@dataclass(frozen=True, slots=True)
class DatasetSpec:
    """Which requests to make. One field per ``--<flag>`` of the same name."""

    name: str = "random"
    path: str | None = None
    num_prompts: int = 1000
    seed: int = 0
    request_id_prefix: str = "bench-"
    shuffle: bool = True
    oversample: bool = True
    # sharegpt
    sharegpt_output_len: int | None = None
    sharegpt_min_len: int = 4  # drop prompt or reference output shorter than this
    sharegpt_max_prompt_len: int = 1024
    sharegpt_max_total_len: int = 2048
    # random
    random_input_len: int = 1024
    random_output_len: int = 128
    random_range_ratio: float = 0.0
    random_output_range_ratio: float | None = None  # None: same as random_range_ratio
    random_prefix_len: int = 0
    # prefix_repetition
    prefix_repetition_prefix_len: int = 256
    prefix_repetition_suffix_len: int = 256
    prefix_repetition_num_prefixes: int = 10
    prefix_repetition_output_len: int = 128
    # custom JSONL
    custom_output_len: int = 256  # -1: take each line's "output_tokens"
    skip_chat_template: bool = False  # custom: vLLM wraps each prompt in the chat template


@dataclass(frozen=True, slots=True)
class TokenizerSpec:
    """Where a tokenizer comes from: a local folder/file, or a hub id looked up in
    the local Hugging Face cache (never downloaded)."""

    name_or_path: str
    trust_remote_code: bool = False
