"""Comparison tables as text: aligned for a terminal, or Markdown.

Both are the same grid of strings: the metric, the baseline's cell, then for
every other config its cell and how it compares (ratio ×, change %, verdict).
"""

from __future__ import annotations

from servelab.reports import verdict as v
from servelab.reports.compare import Comparison, Metric, Table

ESTIMATE_MARK = "*"
# A column header longer than this (a result file's stem: "vllm-10.0qps-concurrency10-Qwen3-14B-20261201-…")
# makes a row a screen wide: the names lose what they share, else become letters with a legend.
MAX_HEADER = 24
_SEPARATORS = "-_./ ,="  # tune names its configs "knob=value,knob=value"
# what compare.unreported_weights took; one text for the console, Markdown and HTML
WEIGHTS_ESTIMATE = ("model weights not reported by the engine (vLLM's CPU build does not): servelab plan's for "
                    "the dtype it serves, else the checkpoint files' size")
ESTIMATE_NOTE = f"{ESTIMATE_MARK} {WEIGHTS_ESTIMATE}"


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
    others, short = table.configs[1:], column_names(table.configs)
    head = ["metric", _named(table, table.baseline, short) + " (baseline)"]
    for config in others:
        head += [_named(table, config, short), f"vs {short[table.baseline]}"]
    rows = []
    for row in table.rows:
        cells = [f"{row.metric.arrow} {row.metric.label}", _cell(table, row, table.baseline)]
        for config in others:
            cells += [_cell(table, row, config), fmt_versus(row.versus.get(config))]
        rows.append(cells)
    for q in table.quality:  # answers, not speed: a figure and a verdict against the baseline's
        cells = [q.label, q.cells.get(table.baseline, "-")]
        for config in others:
            cells += [q.cells.get(config, "-"), q.versus.get(config, "-")]
        rows.append(cells)
    return head, rows


def _named(table: Table, config: str, short: dict[str, str]) -> str:
    n = table.repeats.get(config, 0)
    return f"{short[config]} [{n} run{'s' if n != 1 else ''}]"


def column_names(configs: list[str]) -> dict[str, str]:
    """Each config's column header: its name; when one is over MAX_HEADER, the names without
    what they all share (a common prefix and suffix, cut at a separator); if still too long, A, B, …"""
    if all(len(c) <= MAX_HEADER for c in configs):
        return {c: c for c in configs}
    head, tail = _common_ends(configs)
    cut = {c: c[head:len(c) - tail] for c in configs}
    if len(set(cut.values())) == len(configs) and all(0 < len(x) <= MAX_HEADER for x in cut.values()):
        return cut
    return {c: _letters(i) for i, c in enumerate(configs)}


def _common_ends(names: list[str]) -> tuple[int, int]:
    """Lengths of the prefix and suffix all ``names`` share, each ending on a separator."""
    if len(names) < 2:
        return 0, 0
    shortest = min(len(n) for n in names)
    head = next((i for i in range(shortest) if len({n[i] for n in names}) > 1), shortest)
    while head and names[0][head - 1] not in _SEPARATORS:
        head -= 1
    tail = next((i for i in range(shortest - head) if len({n[len(n) - 1 - i] for n in names}) > 1), 0)
    while tail and names[0][len(names[0]) - tail] not in _SEPARATORS:
        tail -= 1
    return head, tail


def _letters(i: int) -> str:
    return chr(ord("A") + i) if i < 26 else f"C{i + 1}"


def legend(table: Table) -> list[str]:
    """"A = <full name>" for every column whose header is not its whole name."""
    short = column_names(table.configs)
    return [f"{short[c]} = {c}" for c in table.configs if short[c] != c]


def _cell(table: Table, row, config: str) -> str:
    text = fmt_spread(row.cells.get(config), row.metric)
    return text + ESTIMATE_MARK if f"{config}/{row.metric.key}" in table.estimated else text


def title(table: Table) -> str:
    return f"workload {table.workload}" if table.workload else "comparison"


def footer(table: Table, floor: float) -> list[str]:
    lines = list(table.notes)
    names = legend(table)
    if names:
        lines.append("columns: " + "; ".join(names))
    if table.estimated:
        lines.append(ESTIMATE_NOTE)
    lines.append("cells: mean ± half-range over repeats; vs: ratio to the baseline, change, verdict")
    lines.append("verdict rule: " + v.rule_text(floor))
    if table.quality:
        lines.append(QUALITY_RULE)
    return lines


QUALITY_RULE = ("quality rule: agreement = answers identical to the baseline's, paired by prompt; 'diverges beyond it' "
                "when even the top of its 95% interval is below the baseline's own agreement between its repeats "
                "(its floor); task score = share right [95% Wilson interval]; 'keeps the reference's score' when "
                "≥ 99% of the baseline's, item by item, beyond chance; a sampled run is not comparable")


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
