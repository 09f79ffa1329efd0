"""Another precision of a GGUF model, written offline: the shipped Q4_1 SmolLM2 as Q8_0 or F16.

The quantization comparison needs the same model at several bit widths, and the only copy
here is 4-bit. Dequantizing and re-quantizing with the ``gguf`` package keeps every
metadata field (tokenizer, chat template) and tensor name; F32 tensors (norms) stay F32.
The 8- and 16-bit files carry the 4-bit file's rounding (they cannot get back what Q4_1
lost), so quality does not differ much; bytes per weight, and so speed and memory, do.
Written once per variant into the servelab cache, atomically.
"""

from __future__ import annotations

import os
from pathlib import Path

from servelab.errors import InputError

TARGETS = ("Q8_0", "F16")


def gguf_variant(source: Path, target: str, out_dir: Path) -> Path:
    """``source`` re-encoded as ``target`` (Q8_0 or F16) under ``out_dir``, written if missing."""
    if target not in TARGETS:
        raise InputError(f"GGUF variant {target!r}: servelab writes {', '.join(TARGETS)}")
    dest = out_dir / f"{source.name.split('.')[0]}.{target}.gguf"
    if dest.is_file():
        return dest
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(f".tmp{os.getpid()}")
    try:
        _write(source, tmp, target)
        tmp.rename(dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def _write(source: Path, dest: Path, target: str) -> None:
    import gguf

    reader = gguf.GGUFReader(str(source))
    writer = gguf.GGUFWriter(str(dest), reader.fields["general.architecture"].contents())
    file_type = gguf.LlamaFileType.MOSTLY_Q8_0 if target == "Q8_0" else gguf.LlamaFileType.MOSTLY_F16
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue  # the writer sets these itself
        value = int(file_type) if key == "general.file_type" else field.contents()
        writer.add_key_value(key, value, field.types[0], field.types[-1] if len(field.types) > 1 else None)
    qtype = gguf.GGMLQuantizationType[target]
    for tensor in reader.tensors:
        _add_tensor(writer, tensor, qtype, gguf)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _add_tensor(writer, tensor, qtype, gguf) -> None:
    if tensor.tensor_type == gguf.GGMLQuantizationType.F32:
        writer.add_tensor(tensor.name, tensor.data)
        return
    values = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
    if qtype == gguf.GGMLQuantizationType.F16:
        writer.add_tensor(tensor.name, values.astype("float16"))
    else:
        writer.add_tensor(tensor.name, gguf.quants.quantize(values, qtype), raw_dtype=qtype)
