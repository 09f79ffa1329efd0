"""What ``vllm bench serve`` offers and servelab cannot do, each with its reason.

Every such flag, backend and dataset is *parsed* (so vLLM's command lines reach
servelab), then refused here with one line naming it and why — never ignored.
The reasons are data: when servelab learns a dataset (``datasets.SAMPLERS``) or a
backend (``client.openai.BACKENDS``), it simply stops being refused.
"""

from __future__ import annotations

import argparse

from servelab.errors import InputError

_NO_VISION = "servelab sends text only (no image, video or audio model to serve them)"
_GENERATION_ONLY = "servelab measures text generation only (no embedding, pooling or rerank client)"

# flag dest -> why a value other than vLLM's default cannot be honoured
FLAG_REASONS = {
    "enable_multimodal_chat": _NO_VISION,
    "custom_ensure_client_side_data": _NO_VISION,
    "random_mm_base_items_per_request": _NO_VISION,
    "random_mm_num_mm_items_range_ratio": _NO_VISION,
    "random_mm_limit_mm_per_prompt": _NO_VISION,
    "random_mm_bucket_config": _NO_VISION,
    "asr_min_audio_len_sec": _NO_VISION,
    "asr_max_audio_len_sec": _NO_VISION,
    "random_batch_size": "it batches prompts for embeddings benchmarks; " + _GENERATION_ONLY,
}

BACKEND_REASONS = {name: _GENERATION_ONLY for name in (
    "openai-embeddings", "openai-embeddings-chat", "openai-embeddings-clip", "openai-embeddings-vlm2vec",
    "infinity-embeddings", "infinity-embeddings-clip", "vllm-pooling", "vllm-rerank")}
BACKEND_REASONS["openai-audio"] = _NO_VISION
BACKEND_REASONS["openai-responses"] = "the Responses API client is not written yet"

# datasets whose prompts need no tokenizer, so --skip-tokenizer-init can run them (none yet:
# every sampler here measures or builds its prompts in tokens, as vLLM's do)
TOKENIZER_FREE_DATASETS: tuple[str, ...] = ()

TOKENIZER_MODES = ("auto", "hf")  # auto: vLLM's choice for a non-Mistral model, the hf tokenizer


def check_flags(args: argparse.Namespace) -> None:
    """Refuse, in one line, the first flag set to a value servelab cannot honour."""
    defaults = _defaults()
    for dest, reason in FLAG_REASONS.items():
        if getattr(args, dest, defaults[dest]) != defaults[dest]:
            flag = "--" + dest.replace("_", "-")
            raise InputError(f"{flag} is not supported: {reason}")
    mode = getattr(args, "tokenizer_mode", "auto")
    if mode not in TOKENIZER_MODES:
        raise InputError(f"--tokenizer-mode {mode} is not supported: servelab loads Hugging Face tokenizers "
                         f"only (use {' or '.join(TOKENIZER_MODES)})")


def check_backend(backend: str) -> None:
    if backend in BACKEND_REASONS:
        raise InputError(f"--backend {backend} is not supported: {BACKEND_REASONS[backend]}")


def check_skip_tokenizer(dataset: str, skip: bool) -> None:
    if skip and dataset not in TOKENIZER_FREE_DATASETS:
        raise InputError(f"--skip-tokenizer-init: dataset {dataset} measures its prompts with a tokenizer "
                         "(vLLM's fails there too); drop the flag")


def check_dataset(name: str) -> None:
    from servelab.config import AGENTIC_DATASETS
    from servelab.datasets import SAMPLERS, UNSUPPORTED

    if name in SAMPLERS or name in AGENTIC_DATASETS:  # agentic ones: datasets/sessions.py
        return
    if name in UNSUPPORTED:  # the reasons live with the samplers (datasets/__init__.py)
        raise InputError(f"--dataset-name {name} is not supported: {UNSUPPORTED[name]}")
    raise InputError(f"dataset {name} is not supported yet (servelab samples {', '.join(SAMPLERS)})")


_DEFAULTS: dict = {}


def _defaults() -> dict:
    """vLLM's defaults of the refused flags, read from servelab's own parser (one source)."""
    if not _DEFAULTS:
        from servelab.flags.dataset import add_dataset_arguments

        parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
        add_dataset_arguments(parser)
        _DEFAULTS.update({dest: parser.get_default(dest) for dest in FLAG_REASONS})
    return _DEFAULTS
