"""Label–value rows, aligned in one column: the memory report as ``servelab serve`` prints
it and as ``servelab plan`` predicts it.

Both commands (and their tests) read the same rows, so the labels live here, once, below
the CLI; the CLI modules only choose which rows to print.
"""

from __future__ import annotations


def aligned(rows: list[tuple[str, str]], width: int | None = None) -> str:
    """Two spaces, the label padded to ``width`` (default: the longest label), two spaces, the value."""
    width = max((len(label) for label, _ in rows), default=0) if width is None else width
    return "\n".join(f"  {label:<{width}}  {value}" for label, value in rows)


def memory_rows(report) -> list[tuple[str, str]]:
    """An ``engines.memory.MemoryReport`` as rows; "-" where the engine did not say
    (e.g. weights on vLLM's CPU build)."""
    concurrency = _fmt(report.max_concurrency, "{:.2f}x")
    if report.max_concurrency is not None and report.max_concurrency_tokens is not None:
        concurrency += f" at {report.max_concurrency_tokens:,} tokens per request"
    blocks = "-"
    if report.num_gpu_blocks is not None:
        blocks = f"{report.num_gpu_blocks:,}" + (f" x {report.block_size} tokens" if report.block_size else "")
    rows = [
        ("weights", _fmt(report.weights_gib, "{:.2f} GiB")),
        ("load time", _fmt(report.load_time_s, "{:.2f} s")),
        ("KV cache", _fmt(report.kv_cache_gib, "{:.2f} GiB")),
        ("KV cache tokens", _fmt(report.kv_cache_tokens, "{:,}")),
        ("max concurrency", concurrency),
        ("KV blocks", blocks),
    ]
    if report.slots is not None:  # llama.cpp: fixed slots, each with its share of the cells
        rows.append(("slots", f"{report.slots} x {_fmt(report.context_per_slot, '{:,}')} tokens"))
    return rows


def _fmt(value, pattern: str) -> str:
    return "-" if value is None else pattern.format(value)
