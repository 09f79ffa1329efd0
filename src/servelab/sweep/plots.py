"""A sweep's curves as PNG files (matplotlib, imported only here, only when drawing):

    sweep-throughput.png   output tok/s and req/s vs load, the operating point marked
    sweep-latency.png      p50 and p99 of TTFT, TPOT, E2EL vs output tok/s, each point labelled by load
    sweep-goodput.png      with an SLO: req/s vs goodput (req/s meeting it), the SLO's answer marked

Without matplotlib the sweep still runs; it says how to get the plots.
"""

from __future__ import annotations

import sys
from pathlib import Path

from servelab.errors import InputError
from servelab.results.plots import pyplot

LATENCIES = (("TTFT", "ttft"), ("TPOT", "tpot"), ("E2EL", "e2el"))


def _grid_pyplot():
    """pyplot styled for a sweep's curves: a light grid to read values off."""
    plt = pyplot()
    plt.rcParams.update({"font.size": 9, "axes.spines.top": False, "axes.grid": True, "grid.alpha": 0.3})
    return plt


def draw(outcome, folder: Path) -> list[Path]:
    try:
        plt = _grid_pyplot()
    except InputError:  # matplotlib is not installed
        print("servelab: no plots (pip install matplotlib)", file=sys.stderr)
        return []
    if not outcome.points:
        return []
    paths = [_throughput(plt, outcome, folder / "sweep-throughput.png"),
             _latency(plt, outcome, folder / "sweep-latency.png")]
    if outcome.slo is not None:
        paths.append(_goodput(plt, outcome, folder / "sweep-goodput.png"))
    return paths


def _save(plt, fig, path: Path) -> Path:
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return path


def _throughput(plt, outcome, path: Path) -> Path:
    pts, name = outcome.points, outcome.plan.load_name
    fig, ax = plt.subplots(figsize=(6.4, 4))
    ax.plot([p.load for p in pts], [p.throughput for p in pts], "o-", label="output tok/s")
    right = ax.twinx()
    # with fixed output lengths the two curves coincide: req/s is drawn thin, beneath
    right.plot([p.load for p in pts], [p.request_throughput for p in pts], ":", color="#7f7f7f", lw=1,
               label="req/s (right axis)")
    right.set(ylabel="requests/s", ylim=(0, None))
    _mark_knee(ax, outcome)
    ax.set(xlabel=name, ylabel="output tokens/s", title=f"throughput vs {name}", ylim=(0, None))
    _load_axis(ax, pts)
    ax.set_zorder(right.get_zorder() + 1)
    ax.patch.set_visible(False)
    handles = [h for a in (ax, right) for h in a.get_legend_handles_labels()[0]]
    ax.legend(handles=handles, loc="upper left")
    return _save(plt, fig, path)


def _load_axis(ax, pts) -> None:
    """Log scale (ladders are geometric), ticked at the loads measured, labelled as numbers."""
    loads = sorted({p.load for p in pts})
    ax.set_xscale("log")
    ax.set_xticks(loads, [f"{x:g}" for x in loads])
    ax.minorticks_off()


def _mark_knee(ax, outcome) -> None:
    k, ladder = outcome.knee, outcome.ladder_points
    if k.operating_index is not None:
        p = ladder[k.operating_index]
        ax.plot([p.load], [p.throughput], "o", ms=12, mfc="none", mec="#2ca02c", mew=2, label="operating point")
    if k.saturated_index is not None:
        p = ladder[k.saturated_index]
        ax.plot([p.load], [p.throughput], "x", ms=10, color="#d62728", mew=2, label="saturated")


def _latency(plt, outcome, path: Path) -> Path:
    pts = outcome.points
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8), layout="constrained")
    for ax, (title, key) in zip(axes, LATENCIES):
        x = [p.throughput for p in pts]
        ax.plot(x, [p.latency(f"median_{key}") for p in pts], "o-", label="p50")
        ax.plot(x, [p.latency(f"p99_{key}") for p in pts], "s--", label="p99")
        for p in pts:
            ax.annotate(f"{p.load:g}", (p.throughput, p.latency(f"p99_{key}")), fontsize=7,
                        xytext=(3, 3), textcoords="offset points")
        ax.set(xlabel="output tokens/s", ylabel="ms", title=f"{title} vs throughput")
        ax.ticklabel_format(axis="y", useOffset=False)
        ax.legend()
    fig.suptitle(f"latency vs throughput (points labelled by {outcome.plan.load_name})")
    return _save(plt, fig, path)


def _goodput(plt, outcome, path: Path) -> Path:
    pts, slo, name = outcome.points, outcome.slo, outcome.plan.load_name
    fig, ax = plt.subplots(figsize=(6.4, 4))
    loads = [p.load for p in pts]
    ax.plot(loads, [p.request_throughput for p in pts], "o-", label="req/s")
    ax.plot(loads, [p.goodput if p.goodput is not None else float("nan") for p in pts], "s-",
            label="goodput (req/s meeting the SLO)")
    if slo.best is not None:
        ax.axvline(slo.best.load, color="#2ca02c", ls="--", label=f"most load meeting p99 SLO: {slo.best.load:g}")
    ax.set(xlabel=name, ylabel="requests/s", title=f"goodput vs {name}")
    ax.set_ylim(bottom=0)
    _load_axis(ax, pts)
    ax.legend(fontsize=7)
    return _save(plt, fig, path)
