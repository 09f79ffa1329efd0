"""Trace replay by timestamps (vLLM's ``timed_trace`` dataset).

File: JSON Lines, one request per line, field names set by flags (defaults)::

    {"timestamp": 0.5, "input_length": 40, "output_length": 12, "hash_ids": [7, 8, 9]}

Each hash id stands for one chunk of ``--timed-trace-chunk-hash-size`` tokens
(16; the last chunk holds what is left of ``input_length``): requests that share a
hash id share that chunk's tokens, so a trace's prefix sharing is replayed. The
prompt is the chunks' token ids, sent as ids (as vLLM does: no text round trip can
change the count); a trace with too few hash ids for its length gets a shorter
prompt, as in vLLM. The send time is ``timestamp × --timed-trace-sec-multiplier``
seconds from the start; lines are sent in file order, never shuffled or topped up.

A chunk's tokens are ``random.Random(seed).choices(vocabulary without special
tokens, k=size)`` with ``seed`` = the low 32 bits of Python's ``hash`` of
``"<hash id>:<size>"`` — vLLM's recipe. Python randomizes ``hash`` of strings per
process, so vLLM's ids change from run to run unless ``PYTHONHASHSEED=0``; this
module computes that hash (SipHash-1-3, zero key) itself, so servelab's ids never
change and equal vLLM's run under ``PYTHONHASHSEED=0``.
"""

from __future__ import annotations

import math

import random

from servelab.config import DatasetSpec
from servelab.datasets.files import load_jsonl
from servelab.datasets.tokenizer import Tokenizer
from servelab.errors import DatasetError
from servelab.records import SampleRequest

_MASK = (1 << 64) - 1


def sample_timed_trace(spec: DatasetSpec, tokenizer: Tokenizer) -> list[SampleRequest]:
    if spec.path is None:
        raise DatasetError("--dataset-path is required for --dataset-name timed_trace (a .jsonl trace)")
    if spec.timed_trace_chunk_hash_size < 1:
        raise DatasetError("--timed-trace-chunk-hash-size must be >= 1")
    vocab = sorted(set(tokenizer.vocab_ids()) - tokenizer.special_ids)
    chunks: dict[str, list[int]] = {}
    requests = []
    for index, (number, row) in enumerate(load_jsonl(spec.path)[: max(spec.num_prompts, 0)]):
        length, output, stamp, hashes = _fields(spec, f"{spec.path}:{number}", row)
        ids = _expand(hashes, length, spec.timed_trace_chunk_hash_size, vocab, chunks)
        requests.append(SampleRequest(tuple(ids), len(ids), output, f"{spec.request_id_prefix}{index}",
                                      timestamp_s=stamp * spec.timed_trace_sec_multiplier))
    if not requests:
        raise DatasetError(f"{spec.path}: no requests (the trace has no non-blank line)")
    return requests


def _fields(spec: DatasetSpec, where: str, row: object) -> tuple[int, int, float, list]:
    """(input length, output length, timestamp, hash ids) of one line."""
    if not isinstance(row, dict):
        raise DatasetError(f"{where}: each line must be a JSON object")
    labels = {"input length": (spec.timed_trace_label_input_length, "--timed-trace-label-input-length"),
              "output length": (spec.timed_trace_label_output_length, "--timed-trace-label-output-length"),
              "timestamp": (spec.timed_trace_label_timestamp, "--timed-trace-label-timestamp")}
    values = []
    for what, (label, flag) in labels.items():
        value = row.get(label)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise DatasetError(f"{where}: no number in field {label!r} ({what}; fields: {', '.join(map(repr, row))}; "
                               f"name it with {flag})")
        if not (math.isfinite(value) and value >= 0):  # Infinity, NaN and -1 parse as JSON numbers too
            raise DatasetError(f"{where}: field {label!r} ({what}) must be a finite number >= 0, not {value}")
        values.append(value)
    hashes = row.get(spec.timed_trace_label_hash_ids, [])
    if not isinstance(hashes, list):
        raise DatasetError(f"{where}: field {spec.timed_trace_label_hash_ids!r} must be a list of hash ids")
    return int(values[0]), int(values[1]), float(values[2]), hashes


def _expand(hashes: list, length: int, chunk: int, vocab: list[int], chunks: dict[str, list[int]]) -> list[int]:
    """The prompt's ids: one chunk per hash id until ``length`` tokens are placed."""
    ids: list[int] = []
    for h in hashes:
        size = min(chunk, length)
        key = f"{h}:{size}"
        if key not in chunks:
            chunks[key] = random.Random(vllm_key_seed(key)).choices(vocab, k=size)
        ids += chunks[key]
        length -= size
        if length <= 0:
            break
    return ids


def vllm_key_seed(key: str) -> int:
    """``hash(key) & 0xFFFFFFFF`` as Python computes it under ``PYTHONHASHSEED=0``."""
    value = siphash13(_unicode_bytes(key)) if key else 0
    if value == _MASK:  # CPython never returns -1 from a hash: it becomes -2
        value -= 1
    return value & 0xFFFFFFFF


def _unicode_bytes(text: str) -> bytes:
    # CPython hashes a str's internal buffer: 1, 2 or 4 bytes a character by its widest one
    widest = max(map(ord, text))
    return text.encode("latin-1" if widest < 256 else "utf-16-le" if widest < 65536 else "utf-32-le")


def siphash13(data: bytes, k0: int = 0, k1: int = 0) -> int:
    """SipHash-1-3 (one compression round, three finalization rounds), as CPython's
    ``pyhash.c``: 64-bit little-endian words, the length in the top byte of the last."""
    v = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D, k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573]
    full = len(data) - len(data) % 8
    words = [int.from_bytes(data[i:i + 8], "little") for i in range(0, full, 8)]
    words.append(((len(data) & 0xFF) << 56) | int.from_bytes(data[full:], "little"))
    for m in words:
        v[3] ^= m
        _sipround(v)
        v[0] ^= m
    v[2] ^= 0xFF
    for _ in range(3):
        _sipround(v)
    return v[0] ^ v[1] ^ v[2] ^ v[3]


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & _MASK


def _sipround(v: list[int]) -> None:
    v[0] = (v[0] + v[1]) & _MASK
    v[1] = _rotl(v[1], 13) ^ v[0]
    v[0] = _rotl(v[0], 32)
    v[2] = (v[2] + v[3]) & _MASK
    v[3] = _rotl(v[3], 16) ^ v[2]
    v[0] = (v[0] + v[3]) & _MASK
    v[3] = _rotl(v[3], 21) ^ v[0]
    v[2] = (v[2] + v[1]) & _MASK
    v[1] = _rotl(v[1], 17) ^ v[2]
    v[2] = _rotl(v[2], 32)
