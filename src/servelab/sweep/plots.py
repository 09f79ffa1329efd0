"""A sweep's curves as PNG files (matplotlib, imported only here, only when drawing):

    sweep-throughput.png   output tok/s and req/s vs load, the operating point marked
    sweep-latency.png      p50 and p99 of TTFT, TPOT, E2EL vs output tok/s, each point labelled by load
    sweep-goodput.png      with an SLO: req/s vs goodput (req/s meeting it), the SLO's answer marked

A sweep of the simulated engine says SIMULATED on every figure, as it does above its table.
Without matplotlib the sweep still runs; it says how to get the plots.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from servelab.errors import InputError
from servelab.results.plots import pyplot

LATENCIES = (("TTFT", "ttft"), ("TPOT", "tpot"), ("E2EL", "e2el"))
# Two load labels closer than this share of the log axis's span would overlap (a label is ~0.3 in
# wide on an axis ~4.5 in wide); a bisection packs loads far closer (34, 37, 40 between 4 and 64).
LABEL_GAP = 0.08
SIMULATED = "SIMULATED: servelab's vLLM V1 scheduler model — not measured"


def _pyplot():
    """pyplot styled for a sweep's curves: a light grid to read values off."""
    plt = pyplot()
    plt.rcParams.update({"font.size": 9, "axes.spines.top": False, "axes.grid": True, "grid.alpha": 0.3})
    return plt


def draw(outcome, folder: Path) -> list[Path]:
    try:
        plt = _pyplot()
    except InputError:  # matplotlib is not installed
        print("servelab: no plots (pip install matplotlib)", file=sys.stderr)
        return []
    if not outcome.points:
        return []
    return [_save(plt, fig, folder / name) for name, fig in figures(plt, outcome).items()]


def figures(plt, outcome) -> dict:
    """File name -> figure, each labelled SIMULATED when the engine was the simulator."""
    figs = {"sweep-throughput.png": _throughput(plt, outcome), "sweep-latency.png": _latency(plt, outcome)}
    if outcome.slo is not None:
        figs["sweep-goodput.png"] = _goodput(plt, outcome)
    if _simulated(outcome):
        for fig in figs.values():
            fig.text(0.5, 1.0, SIMULATED, ha="center", va="bottom", color="#d62728", weight="bold")
    return figs


def _simulated(outcome) -> bool:
    spec = outcome.plan.engine.spec
    return spec is not None and spec.kind == "sim"


def _save(plt, fig, path: Path) -> Path:
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return path


def _throughput(plt, outcome):
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
    _load_axis(ax, outcome)
    ax.set_zorder(right.get_zorder() + 1)
    ax.patch.set_visible(False)
    handles = [h for a in (ax, right) for h in a.get_legend_handles_labels()[0]]
    ax.legend(handles=handles, loc="upper left")
    return fig


def _load_axis(ax, outcome) -> None:
    """Log scale (ladders are geometric), ticked at every load measured; labelled where a label fits."""
    loads = sorted({p.load for p in outcome.points})
    first = [outcome.operating.load] if outcome.operating is not None else []
    shown = labelled_loads(loads, first)
    ax.set_xscale("log")
    ax.minorticks_off()
    ax.set_xticks(shown, [f"{x:g}" for x in shown])
    ax.set_xticks([x for x in loads if x not in shown], minor=True)
    ax.tick_params(axis="x", which="minor", labelbottom=False)


def labelled_loads(loads: list[float], first: tuple[float, ...] | list[float] = ()) -> list[float]:
    """The loads to label on a log axis: ``first`` (the operating point), the lowest, the highest,
    then the rest bottom up — each only if it is at least LABEL_GAP of the span from every label kept."""
    loads = sorted(set(loads))
    if len(loads) < 2:
        return loads
    gap, kept = LABEL_GAP * math.log(loads[-1] / loads[0]), []
    for x in [*first, loads[0], loads[-1], *loads[1:-1]]:
        if all(abs(math.log(x / k)) >= gap for k in kept):
            kept.append(x)
    return sorted(kept)


def _mark_knee(ax, outcome) -> None:
    """Circle the operating point and cross the saturated one, from every point measured."""
    if outcome.operating is not None:
        p = outcome.operating
        ax.plot([p.load], [p.throughput], "o", ms=12, mfc="none", mec="#2ca02c", mew=2, label="operating point")
    if outcome.saturated_at is not None:
        p = outcome.saturated_at
        ax.plot([p.load], [p.throughput], "x", ms=10, color="#d62728", mew=2, label="saturated")


def _latency(plt, outcome):
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
    return fig


def _goodput(plt, outcome):
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
    _load_axis(ax, outcome)
    ax.legend(fontsize=7)
    return fig
