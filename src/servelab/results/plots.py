"""Plots written beside a result file, under vLLM's names (matplotlib, imported only
when asked; servelab[plot]):

* ``<result>.timeline.html`` (--plot-timeline): one row per request on the run's
  clock — waiting for the first token (grey), then each inter-token gap coloured by
  ``--timeline-itl-thresholds`` (green below the first, orange, red above the second).
  vLLM draws it with plotly; here it is an SVG inside the HTML page, no script needed.
* ``<result>.dataset_stats.png`` (--plot-dataset-stats): histograms of the prompt,
  output and total tokens of the requests that completed.

It also opens matplotlib for every other picture servelab draws (the report's SVGs,
a sweep's curves, a saved run's timeline, a dataset's lengths): ``pyplot()`` here is
the one place the backend is chosen, in the lowest layer that draws.
"""

from __future__ import annotations

import html
import io
from pathlib import Path

from servelab.errors import InputError
from servelab.metrics.summary import NS_PER_S
from servelab.records import RequestRecord

COLORS = ("#2ca02c", "#ff7f0e", "#d62728")  # ITL below, between, above the thresholds
WAIT = "#9e9e9e"  # send to first token


INSTALL = "pip install 'servelab[plot]'"


def has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def require_matplotlib(flag: str, hint: str = "") -> None:
    """Before the run: a plot flag without matplotlib is a one-line error, not a lost plot."""
    if not has_matplotlib():
        raise InputError(f"{flag} needs matplotlib: {INSTALL}{hint}")


def pyplot():
    """``matplotlib.pyplot``, imported on first use (``servelab --help`` stays instant), drawing
    to files only: the Agg backend, chosen before pyplot loads, never opens a window.
    Without matplotlib: InputError, one line saying how to get it."""
    try:
        import matplotlib
    except ImportError:
        raise InputError(f"plots need matplotlib: {INSTALL}") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def itl_color(gap_ms: float, thresholds_ms: tuple[float, float]) -> str:
    low, high = thresholds_ms
    return COLORS[0] if gap_ms < low else COLORS[1] if gap_ms <= high else COLORS[2]


def request_segments(r: RequestRecord, t0_ns: int, thresholds_ms: tuple[float, float]):
    """(start s, width s) spans and their colours for one completed request."""
    points = [r.sent_ns, *r.token_ns]
    spans = [((a - t0_ns) / NS_PER_S, (b - a) / NS_PER_S) for a, b in zip(points, points[1:])]
    colors = [WAIT] + [itl_color((b - a) / 1e6, thresholds_ms) for a, b in zip(r.token_ns, r.token_ns[1:])]
    return merge_runs(spans, colors)


def merge_runs(spans: list[tuple[float, float]], colors: list[str]):
    """Adjacent spans of one colour drawn as one: the picture is the same, and a long
    run (thousands of requests × hundreds of tokens) stays a page a browser can open."""
    out_spans: list[tuple[float, float]] = []
    out_colors: list[str] = []
    for (start, width), color in zip(spans, colors):
        if out_colors and out_colors[-1] == color:
            first, _ = out_spans[-1]
            out_spans[-1] = (first, start + width - first)
        else:
            out_spans.append((start, width))
            out_colors.append(color)
    return out_spans, out_colors


def write_request_timeline(records: list[RequestRecord], t0_ns: int, thresholds_ms: tuple[float, float],
                           path: Path) -> None:
    plt = pyplot()
    done = sorted((r for r in records if r.success and r.token_ns), key=lambda r: r.sent_ns)
    fig, ax = plt.subplots(figsize=(12, max(3.0, min(40.0, 0.12 * len(done) + 1.5))))
    # Past a few hundred requests the bars are drawn as one embedded image (text stays
    # text): 2,000 requests × 128 tokens took 17 s and 32 MB as vector paths, 9 s and 0.1 MB so.
    for row, r in enumerate(done):
        spans, colors = request_segments(r, t0_ns, thresholds_ms)
        ax.broken_barh(spans, (row - 0.4, 0.8), facecolors=colors).set_rasterized(len(done) > 200)
    low, high = thresholds_ms
    ax.set(xlabel="seconds from the first send", ylabel="request (by send time)",
           title=f"{len(done)} requests: grey = waiting for the first token; ITL green < {low:g} ms, "
                 f"orange ≤ {high:g} ms, red above")
    plt.rcParams["svg.fonttype"] = "none"
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    title = html.escape(f"servelab request timeline ({path.stem})")
    path.write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
                    f"<body>{svg}</body></html>\n", encoding="utf-8")


def write_dataset_stats(records: list[RequestRecord], path: Path) -> None:
    plt = pyplot()
    done = [r for r in records if r.success]
    series = {"prompt tokens": [r.prompt_len for r in done], "output tokens": [r.output_tokens for r in done],
              "prompt + output tokens": [r.prompt_len + r.output_tokens for r in done]}
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for ax, (name, values) in zip(axes, series.items()):
        ax.hist(values, bins=30)
        ax.set(title=f"{name} ({len(values)} requests)", xlabel=name, ylabel="requests")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
