"""The report's plots, as inline SVG strings (matplotlib, imported only here).

Every function takes plain values and returns an ``<svg>`` element with its text
kept as text (``svg.fonttype = none``) — small, searchable, and drawn by the
browser with no network font. matplotlib escapes the labels it writes.
"""

from __future__ import annotations

import io
import re

from servelab.results.plots import pyplot

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")
MEMORY_COLORS = {"weights": "#4c72b0", "KV cache": "#55a868", "other": "#c44e52"}


def svg_pyplot():
    """pyplot styled for inline SVG: text kept as text, a fixed hash salt so a page is reproducible."""
    plt = pyplot()
    plt.rcParams.update({"svg.fonttype": "none", "font.size": 9, "axes.spines.top": False,
                         "axes.spines.right": False, "svg.hashsalt": "servelab"})
    return plt


_count = 0


def _svg(fig) -> str:
    """The figure as an inline <svg> (no XML prolog, no fixed pt size: it scales with the page)."""
    global _count
    plt = svg_pyplot()
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r'<svg\1 class="plot"', text, count=1)
    _count += 1
    return _scoped_ids(text, f"f{_count}-")


def _scoped_ids(svg: str, prefix: str) -> str:
    """Prefix every id and #reference: many SVGs share one HTML page, and ids must be unique in it."""
    svg = re.sub(r'\bid="([^"]+)"', rf'id="{prefix}\1"', svg)
    svg = re.sub(r'url\(#([^)]+)\)', rf'url(#{prefix}\1)', svg)
    return re.sub(r'xlink:href="#([^"]+)"', rf'xlink:href="#{prefix}\1"', svg)


def memory_bars(engines: list[dict]) -> str:
    """Stacked horizontal bars, one per engine: {"name", "weights", "KV cache", "other"} in GiB."""
    plt = svg_pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 0.55 * len(engines) + 1.1))
    names = [e["name"] for e in engines]
    left = [0.0] * len(engines)
    for part, color in MEMORY_COLORS.items():
        widths = [e.get(part) or 0.0 for e in engines]
        ax.barh(names, widths, left=left, color=color, label=part, height=0.6)
        left = [a + b for a, b in zip(left, widths)]
    ax.invert_yaxis()
    ax.set_xlabel("GiB")
    ax.legend(loc="lower right", ncols=3, frameon=False, bbox_to_anchor=(1.0, 1.0))
    return _svg(fig)


def throughput_bars(configs: list[str], series: dict[str, list[tuple[float, float, float]]],
                    colors: dict[str, str]) -> str:
    """Grouped bars: per metric (e.g. output tok/s), a bar per config at its mean,
    whiskers from min to max over repeats. ``series[metric][i] = (mean, lo, hi)``."""
    plt = svg_pyplot()
    metrics = list(series)
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.4 * len(metrics), 0.35 * len(configs) + 1.6))
    axes = [axes] if len(metrics) == 1 else list(axes)
    for ax, metric in zip(axes, metrics):
        means = [m for m, _, _ in series[metric]]
        err = [[m - lo for m, lo, _ in series[metric]], [hi - m for m, _, hi in series[metric]]]
        ax.barh(configs, means, xerr=err, color=[colors[c] for c in configs], capsize=3, height=0.6)
        ax.invert_yaxis()
        ax.set_title(metric)
    for ax in axes[1:]:
        ax.set_yticklabels([])
    return _svg(fig)


def distributions(series: dict[str, list[float]], colors: dict[str, str], xlabel: str) -> str:
    """Empirical CDFs, one line per config (values pooled over its repeats); log x when
    values span more than 20×."""
    plt = svg_pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 3.0))
    for config, values in series.items():
        xs = sorted(v for v in values if v > 0)
        if xs:
            ax.step(xs, [(i + 1) / len(xs) for i in range(len(xs))], where="post", color=colors[config],
                    label=f"{config} (n={len(xs)})", linewidth=1.6)
    every = [v for vs in series.values() for v in vs if v > 0]
    if every and max(every) / min(every) > 20:
        from matplotlib.ticker import FuncFormatter, NullFormatter

        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))  # 100, not 10^2
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction ≤ x")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # no run with per-request records (another tool's aggregates): no legend
        ax.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _svg(fig)


def in_flight(panels: list[dict], colors: dict[str, str]) -> str:
    """Requests in flight over time, a panel per config, a line per repeat:
    ``{"config", "lines": [(label, xs_s, ys)], "engine": [(label, xs_s, ys)]}`` (engine:
    running/waiting from telemetry, dashed)."""
    plt = svg_pyplot()
    fig, axes = plt.subplots(len(panels), 1, figsize=(7.5, 1.5 * len(panels) + 0.6), sharex=True, squeeze=False)
    for ax, panel in zip(axes[:, 0], panels):
        for i, (label, xs, ys) in enumerate(panel["lines"]):
            ax.step(xs, ys, where="post", color=colors[panel["config"]], alpha=1.0 if i == 0 else 0.45,
                    linewidth=1.4, label=label)
        for label, xs, ys in panel.get("engine", []):
            ax.plot(xs, ys, linestyle="--", linewidth=1.0, color="#444444" if "running" in label else "#999999",
                    label=label)
        ax.set_ylabel(panel["config"], rotation=0, ha="right", va="center")
        ax.legend(frameon=False, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("seconds from the first send")
    return _svg(fig)


def engine_rates(panels: list[dict], colors: dict[str, str]) -> str:
    """A panel per config: KV cache usage in % (solid, left axis) and generated tokens/s
    (dashed, right axis) over time: ``{"config", "kv": [(s, %)], "tok_s": [(s, tok/s)]}``."""
    plt = svg_pyplot()
    fig, axes = plt.subplots(len(panels), 1, figsize=(7.5, 1.5 * len(panels) + 0.6), sharex=True, squeeze=False)
    for ax, panel in zip(axes[:, 0], panels):
        color = colors[panel["config"]]
        if panel["kv"]:
            ax.plot(*zip(*panel["kv"]), color=color, linewidth=1.4, label="KV usage %")
        ax.set_ylim(bottom=0)
        ax.set_ylabel(panel["config"], rotation=0, ha="right", va="center")
        rate = ax.twinx()
        if panel["tok_s"]:
            rate.plot(*zip(*panel["tok_s"]), color=color, linestyle="--", linewidth=1.0, alpha=0.8, label="tok/s")
        rate.set_ylim(bottom=0)
        rate.tick_params(labelsize=7)
        handles = ax.get_legend_handles_labels()[0] + rate.get_legend_handles_labels()[0]
        ax.legend(handles, [h.get_label() for h in handles], frameon=False, fontsize=7, loc="upper left",
                  bbox_to_anchor=(1.08, 1.0))
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("seconds from the first send")
    return _svg(fig)
