"""An engine's memory report, read from its startup log and ``/metrics``.

Engine knowledge is data: ``LOG_PATTERNS`` is a table of regexes, one per line
format vLLM has printed over the versions, each with where it comes from. The
parser is a loop over the table; a new format is a new row (and a golden line
in ``tests/engines/golden/``).
"""

from __future__ import annotations

import ast
import re
from dataclasses import asdict, dataclass

from prometheus_client.parser import text_string_to_metric_families

_NUM = r"([\d,]+(?:\.\d+)?)"  # vLLM formats token counts with thousands separators ("46,592")


@dataclass(frozen=True, slots=True)
class MemoryReport:
    """What the engine said about its memory. ``None`` = the engine did not say.

    max_concurrency: how many requests of ``max_concurrency_tokens`` tokens each
    fit in the KV cache at once (vLLM's "Maximum concurrency for N tokens per
    request: X x"), i.e. kv_cache_tokens / max_concurrency_tokens.
    slots/context_per_slot: llama.cpp's fixed request slots (``--parallel``) and the
    KV cells each one owns; a hard cap on requests decoded at once.
    """

    weights_gib: float | None = None
    load_time_s: float | None = None
    kv_cache_gib: float | None = None
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    max_concurrency_tokens: int | None = None
    num_gpu_blocks: int | None = None
    block_size: int | None = None
    slots: int | None = None
    context_per_slot: int | None = None
    # The dtype the weights and the KV cache ("auto") are served in, and why that one:
    # set where servelab chose it (vLLM's CPU build, engines/vllm.cpu_dtype), else None.
    dtype: str | None = None
    dtype_reason: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        """One line for progress output: what fits, then what it costs."""
        parts = []
        if self.kv_cache_tokens is not None:
            kv = f"KV cache {self.kv_cache_tokens:,} tokens"
            parts.append(kv + (f" ({self.kv_cache_gib:.2f} GiB)" if self.kv_cache_gib is not None else ""))
        if self.max_concurrency is not None:
            per = f" of {self.max_concurrency_tokens:,} tokens" if self.max_concurrency_tokens else ""
            parts.append(f"{self.max_concurrency:.2f} requests{per} fit")
        if self.weights_gib is not None:
            parts.append(f"weights {self.weights_gib:.2f} GiB")
        if self.dtype is not None:
            parts.append(f"dtype {self.dtype} ({self.dtype_reason})")
        return " · ".join(parts) or "no memory report in its log"


# (field -> value group) per pattern; GB/MB units are converted below.
LOG_PATTERNS: list[tuple[re.Pattern[str], dict[str, int]]] = [
    # V1 gpu_model_runner. Current (0.32 source, 2026 logs):
    #   "Model loading took 12.66 GiB memory and 31.657031 seconds"
    # 2025 logs (0.8–0.11): "Model loading took 2.2845 GiB and 74.270197 seconds"
    (re.compile(rf"Model loading took {_NUM} GiB(?: memory)? and {_NUM} seconds"),
     {"weights_gib": 1, "load_time_s": 2}),
    # V0 and early V1 (2024 – early 2025): "Loading model weights took 18.4902 GB"
    # ("GB" there is bytes / 2**30, i.e. GiB)
    (re.compile(rf"Loading model weights took {_NUM} GB\b"), {"weights_gib": 1}),
    # The very first version (2024-02): "Loading model weights took 244.61 MB" (MiB)
    (re.compile(rf"Loading model weights took {_NUM} MB\b"), {"weights_mib": 1}),
    # V0 memory profiling, 0.6.5–0.8 (one line: "model weights take 21.21GiB; non_torch_memory …")
    # and the Dec 2024 table form ("model weights take   14.96GiB"). Same bytes as the line above.
    (re.compile(rf"model weights take\s+{_NUM} ?GiB"), {"weights_gib": 1}),
    # Weight loading alone (default_loader), also printed by the CPU build, which has no
    # "Model loading took" line: "Loading weights took 1.23 seconds". Lower priority:
    # on GPU "Model loading took … and Y seconds" follows it and covers the whole load.
    (re.compile(rf"Loading weights took {_NUM} seconds"), {"load_time_s": 1}),
    # V1 gpu_worker: "Available KV cache memory: 2.30 GiB"
    (re.compile(rf"Available KV cache memory: {_NUM} GiB"), {"kv_cache_gib": 1}),
    # CPU build (cpu_worker), per NUMA node: "Explicitly set (1.0/9.34) GiB for KV cache on node 0."
    # (from VLLM_CPU_KVCACHE_SPACE) or "Auto set (2.5/31.2) GiB for KV cache on node 0, with …"
    (re.compile(rf"(?:Explicitly|Auto) set \({_NUM}/{_NUM}\) GiB for KV cache"), {"kv_cache_gib": 1}),
    # V0 0.6.5–0.8 memory profiling: "… the rest of the memory reserved for KV Cache is 1.57GiB."
    (re.compile(rf"reserved for KV Cache is {_NUM} ?GiB"), {"kv_cache_gib": 1}),
    # V0 Dec 2024 table form: "available_kv_cache_memory    53.29GiB"
    (re.compile(rf"available_kv_cache_memory\s+{_NUM} ?GiB"), {"kv_cache_gib": 1}),
    # V0 0.6.x memory profiling results: "..., kv_cache_size=34.96GiB, ..."
    (re.compile(rf"\bkv_cache_size={_NUM}GiB"), {"kv_cache_gib": 1}),
    # V1: "GPU KV cache size: 75,840 tokens"; CPU build: "CPU KV cache size: …";
    # hisparse: "GPU + host KV cache size: …". Current vLLM prints the concurrency on the same line.
    (re.compile(rf"KV cache size: {_NUM} tokens"), {"kv_cache_tokens": 1}),
    # All versions: "Maximum concurrency for 2,048 tokens per request: 22.75x"
    (re.compile(rf"Maximum concurrency for {_NUM} tokens per request: {_NUM}x"),
     {"max_concurrency_tokens": 1, "max_concurrency": 2}),
    # V0: "# GPU blocks: 189945, # CPU blocks: 21845"; early V1: "# GPU blocks: 1381"
    (re.compile(rf"# GPU blocks: {_NUM}"), {"num_gpu_blocks": 1}),
    # (The CPU build prints no weights size; its memory report leaves weights_gib None.)
    # llama.cpp (xllamacpp, verbosity >= 4; servelab's llamacpp_main asks for it):
    #   "llama_kv_cache: size =  180.00 MiB (  8192 cells,  30 layers,  1/1 seqs), K (f16): …"
    # cells are per stream: with --parallel 4 (not unified) "1024 cells, 30 layers, 4/4 seqs" holds 4 × 1024
    # tokens; "N/M seqs" is streams / sequences (a unified cache is 1 stream).
    (re.compile(r"llama_kv_cache: size =\s*[\d.]+ MiB \(\s*(\d+) cells,\s*\d+ layers,\s*(\d+)/\d+ seqs"),
     {"kv_cells": 1, "kv_streams": 2}),
    # server: "load_model: initializing, n_slots = 1, n_ctx_slot = 8192, kv_unified = 'false'"
    (re.compile(r"n_slots = (\d+), n_ctx_slot = (\d+)"), {"slots": 1, "context_per_slot": 2}),
]

# Fields summed over every matching line, in MiB: llama.cpp prints one model buffer per
# device ("load_tensors:   CPU_Mapped model buffer size =    92.10 MiB", "CUDA0 model buffer …")
# and one KV cache per attention kind (sliding-window models have two).
SUMMED_MIB: dict[str, re.Pattern[str]] = {
    "weights_gib": re.compile(r"load_tensors:\s+\S+ model buffer size =\s*([\d.]+) MiB"),
    "kv_cache_gib": re.compile(r"llama_kv_cache: size =\s*([\d.]+) MiB"),
}

_INTS = {"kv_cells", "kv_streams", "kv_cache_tokens", "max_concurrency_tokens", "num_gpu_blocks", "block_size",
         "slots", "context_per_slot"}


def parse_memory_report(log_text: str) -> MemoryReport:
    """Scan a whole startup log. A field comes from the earliest row of the table
    that matches, and from that row's first matching line: vLLM repeats a line
    per engine/worker and they agree, while a later reload (sleep mode) would
    describe something else.
    """
    found: dict[str, float | int] = {}
    for pattern, groups in LOG_PATTERNS:
        match = pattern.search(log_text)
        if match:
            for name, group in groups.items():
                found.setdefault(name, _number(match.group(group), name))
    if "weights_mib" in found:
        found.setdefault("weights_gib", found["weights_mib"] / 1024)
        del found["weights_mib"]
    for name, pattern in SUMMED_MIB.items():
        mib = [float(value) for value in pattern.findall(log_text)]
        if mib:
            found.setdefault(name, round(sum(mib) / 1024, 6))
    if "kv_cells" in found:
        found.setdefault("kv_cache_tokens", found.pop("kv_cells") * found.pop("kv_streams"))
    _slots_as_concurrency(found)
    return MemoryReport(**found)


def _slots_as_concurrency(found: dict) -> None:
    """llama.cpp's slots are its concurrency: each holds n_ctx_slot tokens of the cells."""
    if "slots" in found:
        found.setdefault("max_concurrency", float(found["slots"]))
        found.setdefault("max_concurrency_tokens", found.get("context_per_slot"))


def _number(text: str, name: str) -> float | int:
    value = float(text.replace(",", ""))
    return int(value) if name in _INTS else value


# vllm:cache_config_info{block_size="16",...,num_gpu_blocks="2912",...} 1.0
_CACHE_INFO = "vllm:cache_config_info"


# label -> (field, scale). Newer vLLM (0.32) also exports the KV capacity it logs,
# which fills the report for a server whose log we cannot read (kind external).
# kv_cache_memory_bytes is "None" unless the size was fixed (CPU build, --kv-cache-memory-bytes).
CACHE_INFO_LABELS: dict[str, tuple[str, float | None]] = {
    "num_gpu_blocks": ("num_gpu_blocks", None),
    "block_size": ("block_size", None),
    "kv_cache_size_tokens": ("kv_cache_tokens", None),
    "kv_cache_max_concurrency": ("max_concurrency", 1.0),
    "kv_cache_memory_bytes": ("kv_cache_gib", 1 / 2**30),
}


# vLLM's "non-default args: {...}" line (log_non_default_args, vllm/entrypoints/serve/utils/api_utils.py,
# 0.32): the repr of a dict of EngineArgs names to what the server was given, however it was given (its
# command line, a --config YAML, an image's entrypoint). A pair is read when its value is a literal.
_STATED_LINE = re.compile(r"non-default args: \{(.*)\}\s*$", re.M)
_STATED_PAIR = re.compile(r"'(\w+)': ('(?:[^'\\]|\\.)*'|-?\d+(?:\.\d+)?(?:e-?\d+)?|True|False|None)(?=, '|$)")


def parse_stated_args(log_text: str) -> dict[str, str | int | float | bool]:
    """The knobs vLLM says it was started with (its last "non-default args" line), by EngineArgs
    name: ``{"max_num_seqs": 2, "dtype": "float32", ...}``; {} when the log has no such line."""
    found = _STATED_LINE.findall(log_text)
    if not found:
        return {}
    try:  # the whole dict when every value is a literal; else its literal pairs (an enum's repr is not one)
        pairs = ast.literal_eval("{" + found[-1] + "}").items()
    except (ValueError, SyntaxError):
        flat = re.sub(r"\{[^{}]*\}", "{}", found[-1])  # a nested dict's pairs are not the server's args
        pairs = [(name, ast.literal_eval(text)) for name, text in _STATED_PAIR.findall(flat)]
    return {name: value for name, value in pairs if isinstance(value, (bool, int, float, str))}


def parse_cache_config_info(metrics_text: str) -> dict[str, float | int]:
    """Report fields from the labels of ``vllm:cache_config_info`` in Prometheus text.

    vLLM exports its CacheConfig as labels of a gauge fixed at 1; a label reads
    "None" when unset (e.g. num_gpu_blocks on some builds), and is then skipped.
    """
    labels = _cache_info_labels(metrics_text)
    found: dict[str, float | int] = {}
    for label, (name, scale) in CACHE_INFO_LABELS.items():
        try:
            value = float(labels.get(label, ""))
        except ValueError:
            continue
        found[name] = int(value) if scale is None else round(value * scale, 4)
    return found


def _cache_info_labels(metrics_text: str) -> dict[str, str]:
    """The labels of the first ``vllm:cache_config_info`` sample, read by
    prometheus_client (only that line is parsed; the page has ~600). A line it
    cannot read gives none: the report then keeps what the log said."""
    lines = [x for x in metrics_text.splitlines() if x.split("{", 1)[0].strip() == _CACHE_INFO]
    try:
        samples = [s for f in text_string_to_metric_families("\n".join(lines[:1])) for s in f.samples]
    except ValueError:
        return {}
    return samples[0].labels if samples else {}


def with_cache_info(report: MemoryReport, info: dict[str, float | int]) -> MemoryReport:
    """The report, completed (never overridden) by ``/metrics`` labels."""
    merged = report.to_dict()
    for key, value in info.items():
        if merged.get(key) is None:
            merged[key] = value
    return MemoryReport(**merged)
