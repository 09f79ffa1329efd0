"""Comparison tables as text: aligned for a terminal, or Markdown.

Both are the same grid of strings: the metric, the baseline's cell, then for
every other config its cell and how it compares (ratio ×, change %, verdict).
"""

from __future__ import annotations

from servelab.reports import verdict as v
from servelab.reports.compare import Comparison, Metric, Table

ESTIMATE_MARK = "*"
ESTIMATE_NOTE = (f"{ESTIMATE_MARK} model weights from the checkpoint files' size: the engine did not "
                 "report them (vLLM's CPU build does not)")


def fmt_number(x: float, digits: int) -> str:
    return f"{x:,.{digits}f}"


def fmt_spread(cell: v.Spread | None, metric: Metric) -> str:
    """mean ± half-range over repeats (one run: the value alone)."""
    if cell is None:
        return "-"
    text = fmt_number(cell.mean, metric.digits)
    if cell.n > 1 and not metric.memory:
        text += f" ± {fmt_number(cell.half_range, metric.digits)}"
    return text


def fmt_versus(c: Comparison | None) -> str:
    if c is None or c.ratio is None:
        return "-"
    change = f"{c.change_pct:+.1f}".replace("-", "−")  # a real minus sign: "−65.5%"
    return f"{c.ratio:.2f}× {change}% {c.verdict}"


def grid(table: Table) -> tuple[list[str], list[list[str]]]:
    """Header and rows of strings for ``table``."""
    others = table.configs[1:]
    head = ["metric", _named(table, table.baseline) + " (baseline)"]
    for config in others:
        head += [_named(table, config), f"vs {table.baseline}"]
    rows = []
    for row in table.rows:
        cells = [f"{row.metric.arrow} {row.metric.label}", _cell(table, row, table.baseline)]
        for config in others:
            cells += [_cell(table, row, config), fmt_versus(row.versus.get(config))]
        rows.append(cells)
    return head, rows


def _named(table: Table, config: str) -> str:
    n = table.repeats.get(config, 0)
    return f"{config} [{n} run{'s' if n != 1 else ''}]"


def _cell(table: Table, row, config: str) -> str:
    text = fmt_spread(row.cells.get(config), row.metric)
    return text + ESTIMATE_MARK if f"{config}/{row.metric.key}" in table.estimated else text


def title(table: Table) -> str:
    return f"workload {table.workload}" if table.workload else "comparison"


def footer(table: Table, floor: float) -> list[str]:
    lines = list(table.notes)
    if table.estimated:
        lines.append(ESTIMATE_NOTE)
    lines.append("cells: mean ± half-range over repeats; vs: ratio to the baseline, change, verdict")
    lines.append("verdict rule: " + v.rule_text(floor))
    return lines


def render_text(tables: list[Table], floor: float = v.NOISE_FLOOR) -> str:
    blocks = []
    for table in tables:
        head, rows = grid(table)
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
        out = [f"== {title(table)} — {table.load}", _aligned(head, widths), _aligned(["-" * w for w in widths], widths)]
        out += [_aligned(r, widths) for r in rows]
        out += ["  " + note for note in footer(table, floor)]
        blocks.append("\n".join(out))
    return "\n\n".join(blocks)


def _aligned(cells: list[str], widths: list[int]) -> str:
    return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()


def render_markdown(tables: list[Table], floor: float = v.NOISE_FLOOR) -> str:
    blocks = []
    for table in tables:
        head, rows = grid(table)
        out = [f"### {title(table)}", "", f"Load: {table.load}", "",
               _md_row(head), "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
        out += [_md_row(r) for r in rows]
        out += [""] + [f"- {note}" for note in footer(table, floor)]
        blocks.append("\n".join(out))
    return "\n\n".join(blocks)


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"
