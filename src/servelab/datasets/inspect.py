"""What a sample of requests looks like: length statistics, a histogram, examples.

Pure: takes SampleRequests, returns values and text. Statistics are numpy's
(mean, median, population std), as in the benchmark summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from servelab.records import SampleRequest

HISTOGRAM_BINS = 9
BAR_WIDTH = 40
PROMPT_PREVIEW_CHARS = 200


@dataclass(frozen=True, slots=True)
class LengthStats:
    min: int
    max: int
    mean: float
    median: float
    std: float  # population (ddof=0)


@dataclass(frozen=True, slots=True)
class HistogramRow:
    low: float
    high: float  # bins are [low, high), the last one [low, high]
    count: int


@dataclass(frozen=True, slots=True)
class Inspection:
    total: int
    prompt: LengthStats
    output: LengthStats | None  # None when no request fixes its output length
    histogram: tuple[HistogramRow, ...]


def inspect_requests(requests: Sequence[SampleRequest]) -> Inspection:
    prompt_lens = [r.prompt_len for r in requests]
    output_lens = [r.expected_output_len for r in requests if r.expected_output_len is not None]
    return Inspection(
        total=len(requests),
        prompt=length_stats(prompt_lens),
        output=length_stats(output_lens) if output_lens else None,
        histogram=histogram(prompt_lens),
    )


def length_stats(values: Sequence[int]) -> LengthStats:
    a = np.asarray(values, dtype=float)
    return LengthStats(int(a.min()), int(a.max()), float(a.mean()), float(np.median(a)), float(a.std()))


def histogram(values: Sequence[int], bins: int = HISTOGRAM_BINS) -> tuple[HistogramRow, ...]:
    """Equal-width bins over [min, max]; one row when every value is the same
    (numpy would spread them over bins of an invented ±0.5 range)."""
    low, high = min(values), max(values)
    if low == high:
        return (HistogramRow(low, high, len(values)),)
    counts, edges = np.histogram(values, bins=bins, range=(low, high))
    return tuple(HistogramRow(float(edges[i]), float(edges[i + 1]), int(c)) for i, c in enumerate(counts))


def render_report(
    inspection: Inspection, requests: Sequence[SampleRequest], dataset: str, tokenizer: str, num_samples: int
) -> str:
    """The ``data inspect`` text: plain, aligned, ready to paste."""
    sections = [
        _overview(inspection, dataset, tokenizer),
        _lengths(inspection),
        _samples(requests, num_samples),
        _histogram(inspection.histogram),
    ]
    return "\n\n".join(s for s in sections if s) + "\n"


def _overview(inspection: Inspection, dataset: str, tokenizer: str) -> str:
    rows = [["dataset", dataset], ["tokenizer", tokenizer], ["samples", str(inspection.total)]]
    return "Overview\n" + table(rows, align="ll")


def _lengths(inspection: Inspection) -> str:
    rows = [["", "min", "max", "mean", "median", "std"], _stats_row("prompt", inspection.prompt)]
    rows.append(_stats_row("output", inspection.output))
    return "Length distributions (tokens)\n" + table(rows, align="lrrrrr")


def _stats_row(label: str, s: LengthStats | None) -> list[str]:
    if s is None:
        return [label, "-", "-", "-", "-", "-"]
    return [label, str(s.min), str(s.max), f"{s.mean:.2f}", f"{s.median:.2f}", f"{s.std:.2f}"]


def _samples(requests: Sequence[SampleRequest], num_samples: int) -> str:
    shown = list(requests[: max(0, num_samples)])
    if not shown:
        return ""
    lines = [f"Sample prompts ({len(shown)} of {len(requests)})"]
    for r in shown:
        output = "-" if r.expected_output_len is None else r.expected_output_len
        lines.append(f"  {r.request_id}  prompt_len={r.prompt_len}  output_len={output}")
        lines.append(f"    {preview(r.prompt)}")
    return "\n".join(lines)


def preview(prompt: str | tuple[int, ...], limit: int = PROMPT_PREVIEW_CHARS) -> str:
    """The first ``limit`` characters on one line (newlines shown as \\n); a
    token-id prompt (a trace replay) is shown as its ids."""
    if not isinstance(prompt, str):
        prompt = "token ids " + " ".join(map(str, prompt))
    cut = prompt[:limit] + ("..." if len(prompt) > limit else "")
    return cut.replace("\\", "\\\\").replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t")


def _histogram(rows: Sequence[HistogramRow]) -> str:
    peak = max(r.count for r in rows)
    bars = ["#" * round(BAR_WIDTH * r.count / peak) for r in rows]
    title = f"Prompt length histogram (tokens, {len(rows)} bin{'s' if len(rows) > 1 else ''})\n"
    if len(rows) == 1:
        return title + table([[f"{rows[0].low:g}", bars[0], str(rows[0].count)]], align="rlr")
    cells = [[f"{r.low:.1f}", "-", f"{r.high:.1f}", bar, str(r.count)] for r, bar in zip(rows, bars)]
    return title + table(cells, align="rlrlr")


def table(rows: Sequence[Sequence[str]], align: str) -> str:
    """Rows indented by two spaces, columns two apart, each padded to its widest
    cell (``align``: one 'l' or 'r' per column); no trailing spaces."""
    widths = [max(len(row[c]) for row in rows) for c in range(len(align))]
    lines = []
    for row in rows:
        cells = [cell.ljust(w) if a == "l" else cell.rjust(w) for cell, w, a in zip(row, widths, align)]
        lines.append(("  " + "  ".join(cells)).rstrip())
    return "\n".join(lines)
