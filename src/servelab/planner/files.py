"""The planner's only I/O: a model's shape from a local folder's config.json or a GGUF header.

A folder also gives the checkpoint's real size (its ``*.safetensors`` files), and a
GGUF its tensors' exact bytes, so the weights need no estimate. A Hugging Face id is
looked up in the local hub cache (``$HF_HOME/hub`` or ``~/.cache/huggingface/hub``);
nothing is downloaded.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from servelab.errors import InputError
from servelab.planner.models import ModelShape, find_model


@dataclass(frozen=True, slots=True)
class ModelSource:
    """A model and what its files say beyond the shape (None: no files, the table's figures)."""

    shape: ModelShape
    weights_bytes: int | None = None
    quantization: str | None = None
    path: Path | None = None


def load_model(name: str) -> ModelSource:
    """A path (folder, config.json, .gguf), a table name, or a hub id in the local cache."""
    path = Path(os.path.expanduser(name))
    if path.suffix == ".gguf" and path.is_file():
        return from_gguf(path)
    if path.name == "config.json" and path.is_file():
        path = path.parent
    if (path / "config.json").is_file():
        return from_folder(path)
    table = find_model(name)
    if table is not None:
        return ModelSource(table)
    cached = hub_cache_folder(name)
    if cached is not None:
        return from_folder(cached)
    raise InputError(f"unknown model {name!r}: pass a local folder or config.json path, a .gguf file, "
                     "or a model from `servelab plan --list-models`")


def hub_cache_folder(model_id: str) -> Path | None:
    home = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
    repo = home / "hub" / ("models--" + model_id.replace("/", "--"))
    snapshots = sorted((repo / "snapshots").glob("*/config.json"), key=lambda p: p.stat().st_mtime)
    return snapshots[-1].parent if snapshots else None


def from_folder(folder: Path) -> ModelSource:
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {folder / 'config.json'}: {exc}") from None
    weights = sum(p.stat().st_size for p in folder.glob("*.safetensors")) or None
    quant = (config.get("quantization_config") or {}).get("quant_method")
    return ModelSource(shape_from_config(config, folder.name), weights, quant, folder)


def shape_from_config(config: dict, name: str) -> ModelShape:
    """A ModelShape from Hugging Face config.json fields (a multimodal model's text_config)."""
    text = {**config, **config.get("text_config", {})}
    try:
        heads = text["num_attention_heads"]
        experts = text.get("num_experts") or text.get("num_local_experts") or text.get("n_routed_experts") or 0
        return ModelShape(
            name=name, layers=text["num_hidden_layers"], hidden=text["hidden_size"], heads=heads,
            kv_heads=text.get("num_key_value_heads") or heads,
            head_dim=text.get("head_dim") or text["hidden_size"] // heads,
            intermediate=text["intermediate_size"], vocab=text["vocab_size"],
            max_position=text.get("max_position_embeddings", 2048),
            tied_embeddings=bool(config.get("tie_word_embeddings", text.get("tie_word_embeddings", False))),
            experts=experts, active_experts=text.get("num_experts_per_tok", 0) if experts else 0,
            shared_experts=text.get("n_shared_experts") or 0,
            moe_intermediate=(text.get("moe_intermediate_size") or text["intermediate_size"]) if experts else 0,
            dense_layers=(text.get("first_k_dense_replace") or 0) if experts else 0,
            kv_lora_rank=text.get("kv_lora_rank") or 0, qk_rope_head_dim=text.get("qk_rope_head_dim") or 0)
    except KeyError as exc:
        raise InputError(f"config.json of {name} has no {exc.args[0]}: not a decoder model plan knows") from None


def from_gguf(path: Path) -> ModelSource:
    """Shape, exact tensor bytes and file type from a GGUF header (the ``gguf`` package)."""
    try:
        import gguf
    except ImportError:
        raise InputError("reading a GGUF needs the gguf package: pip install gguf") from None
    reader = gguf.GGUFReader(str(path))
    field = _gguf_fields(reader)
    arch = field("general.architecture")
    names = {tensor.name for tensor in reader.tensors}
    heads = field(f"{arch}.attention.head_count")
    hidden = field(f"{arch}.embedding_length")
    shape = ModelShape(
        name=path.name, layers=field(f"{arch}.block_count"), hidden=hidden, heads=heads,
        kv_heads=field(f"{arch}.attention.head_count_kv") or heads,
        head_dim=field(f"{arch}.attention.key_length") or hidden // heads,
        intermediate=field(f"{arch}.feed_forward_length"),
        vocab=field(f"{arch}.vocab_size") or len(reader.fields["tokenizer.ggml.tokens"].data),
        max_position=field(f"{arch}.context_length"), tied_embeddings="output.weight" not in names,
        params=sum(int(t.n_elements) for t in reader.tensors))
    file_type = gguf.LlamaFileType(field("general.file_type")).name.removeprefix("MOSTLY_")
    return ModelSource(shape, sum(int(t.n_bytes) for t in reader.tensors), file_type, path)


def _gguf_fields(reader):
    def field(key: str):
        found = reader.fields.get(key)
        return found.contents() if found is not None else None
    return field
