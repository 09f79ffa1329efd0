"""Tables people paste (into an issue, a chat, a report): Markdown pipes, aligned so
they read as well in a terminal as rendered."""

from __future__ import annotations

import math

from servelab.search.points import Point

# (header, latency key) of the sweep table; p50 is the median.
LATENCY_COLUMNS = (("p50 TTFT ms", "median_ttft"), ("p99 TTFT ms", "p99_ttft"),
                   ("p50 TPOT ms", "median_tpot"), ("p99 TPOT ms", "p99_tpot"),
                   ("p50 E2EL ms", "median_e2el"), ("p99 E2EL ms", "p99_e2el"))


def markdown(header: list[str], rows: list[list[str]], text: tuple[str, ...] = ("note",)) -> str:
    """The first column and the ``text`` columns left-aligned, the rest (numbers) right-aligned."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    left = [i == 0 or h in text for i, h in enumerate(header)]

    def line(cells) -> str:
        parts = [str(c).ljust(w) if lf else str(c).rjust(w) for c, w, lf in zip(cells, widths, left)]
        return "| " + " | ".join(parts) + " |"

    rule = "|" + "|".join(":" + "-" * (w + 1) if lf else "-" * (w + 1) + ":" for w, lf in zip(widths, left)) + "|"
    return "\n".join([line(header), rule, *(line(r) for r in rows)])


def num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:,.{digits}f}"


def points_table(points: list[Point], load_name: str, marks: dict[float, str] | None = None,
                 goodput: bool = False) -> str:
    """One row per point, by load; ``marks`` adds a note to a load (e.g. "← operating point")."""
    marks = marks or {}
    header = [load_name, "out tok/s", "req/s", *(h for h, _ in LATENCY_COLUMNS), "errors"]
    header += ["goodput req/s"] if goodput else []
    header += ["note"] if marks else []
    rows = []
    for p in sorted(points, key=lambda p: p.load):
        row = [f"{p.load:g}", num(p.throughput), num(p.request_throughput, 2),
               *(num(p.latency(key), 0) for _, key in LATENCY_COLUMNS), str(p.errors)]
        row += [num(p.goodput, 2)] if goodput else []
        row += [marks.get(p.load, "")] if marks else []
        rows.append(row)
    return markdown(header, rows)
