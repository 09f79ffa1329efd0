"""Another precision of a GGUF model, written offline: the shipped Q4_1 SmolLM2 as F16, Q8_0 or Q4_0.

The quantization comparison needs the same model at several bit widths, and the only copy
here is 4-bit. The F16 is the shipped file dequantized: it carries the 4-bit file's rounding
(it cannot get back what Q4_1 lost) and is the reference. Q8_0 and Q4_0 are quantized from
that F16, as a user quantizes from a full-precision file, so each loses what its own bit
width loses from the reference. Dequantizing and re-quantizing with the ``gguf`` package
keeps every metadata field (tokenizer, chat template) and tensor name; F32 tensors (norms)
stay F32. Written once per variant into the servelab cache, atomically.
"""

from __future__ import annotations

import os
from pathlib import Path

from servelab.errors import InputError

TARGETS = ("F16", "Q8_0", "Q4_0")
REFERENCE = "F16"  # what the quantized targets are made from


def gguf_variant(source: Path, target: str, out_dir: Path) -> Path:
    """``source`` re-encoded as ``target`` under ``out_dir``, written if missing.

    F16 is made from ``source``; a quantized target from the F16 (written first if missing)."""
    if target not in TARGETS:
        raise InputError(f"GGUF variant {target!r}: servelab writes {', '.join(TARGETS)}")
    dest = out_dir / f"{source.name.split('.')[0]}.{target}.gguf"
    if dest.is_file():
        return dest
    out_dir.mkdir(parents=True, exist_ok=True)
    origin = source if target == REFERENCE else gguf_variant(source, REFERENCE, out_dir)
    tmp = dest.with_suffix(f".tmp{os.getpid()}")
    try:
        _write(origin, tmp, target)
        tmp.rename(dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def _write(source: Path, dest: Path, target: str) -> None:
    import gguf

    reader = gguf.GGUFReader(str(source))
    writer = gguf.GGUFWriter(str(dest), reader.fields["general.architecture"].contents())
    file_type = gguf.LlamaFileType[f"MOSTLY_{target}"]
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue  # the writer sets these itself
        value = int(file_type) if key == "general.file_type" else field.contents()
        writer.add_key_value(key, value, field.types[0], field.types[-1] if len(field.types) > 1 else None)
    qtype = gguf.GGMLQuantizationType[target]
    head = _head_name(reader)
    for tensor in reader.tensors:
        _add_tensor(writer, tensor, _head_type(tensor, target, gguf) if tensor.name == head else qtype, gguf)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _head_name(reader) -> str:
    """The output head: ``output.weight``, or the token embedding when the two are tied."""
    names = {t.name for t in reader.tensors}
    return "output.weight" if "output.weight" in names else "token_embd.weight"


def _head_type(tensor, target: str, gguf):
    """llama.cpp's rule (llama-quant.cpp) for the head of a quantized file: Q6_K, or Q8_0 when
    its rows are not a multiple of 256 values; a float file keeps it at its own type.
    (The planner's ``gguf_weights_bytes`` models the same layout.)"""
    if target == REFERENCE:
        return gguf.GGMLQuantizationType[target]
    if int(tensor.shape[0]) % 256 == 0:
        raise InputError(f"GGUF variant {target}: the head {tensor.name} takes Q6_K in llama.cpp's layout, "
                         "which the gguf package cannot write")
    return gguf.GGMLQuantizationType.Q8_0


def _add_tensor(writer, tensor, qtype, gguf) -> None:
    if tensor.tensor_type == gguf.GGMLQuantizationType.F32:
        writer.add_tensor(tensor.name, tensor.data)
        return
    values = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
    if qtype == gguf.GGMLQuantizationType.F16:
        writer.add_tensor(tensor.name, values.astype("float16"))
    else:
        writer.add_tensor(tensor.name, gguf.quants.quantize(values, qtype), raw_dtype=qtype)
