"""A saved run's telemetry timeline as PNG files (``servelab diagnose --plot DIR``).

    plot_timeline(timeline, out_dir) -> [queue.png, kv_usage.png, tokens_per_s.png(, gpu.png)]

The x axis is seconds from t0 on every plot, so they line up when stacked. A
plot whose data is missing is still written, with a note saying why, so a
report can embed a fixed set of files. (Here, not in telemetry/: drawing needs
``results.plots.pyplot``, which a module beside results in layer 2 cannot import.)
"""

from __future__ import annotations

from pathlib import Path

from servelab.results.plots import pyplot
from servelab.telemetry.timeline import Timeline


def series(samples: list[dict], field: str) -> tuple[list[float], list[float]]:
    pts = [(s["t_ms"] / 1000.0, s[field]) for s in samples if s.get(field) is not None]
    return [t for t, _ in pts], [v for _, v in pts]


def rate(samples: list[dict], field: str) -> tuple[list[float], list[float]]:
    """A counter's per-second rate between consecutive samples, at their midpoints."""
    t, v = series(samples, field)
    pairs = [(t[i], t[i + 1], v[i], v[i + 1]) for i in range(len(t) - 1) if t[i + 1] > t[i]]
    return ([(a + b) / 2 for a, b, _, _ in pairs], [max(0.0, (y - x) / (b - a)) for a, b, x, y in pairs])


def _queue(ax, tl: Timeline) -> str | None:
    engine, client = tl.of("engine"), tl.of("client")
    for samples, field, label in ((engine, "running", "engine running"), (engine, "waiting", "engine waiting"),
                                  (client, "in_flight", "client in flight"),
                                  (client, "waiting", "client waiting for a slot")):
        ax.step(*series(samples, field), where="post", label=label)
    ax.set_ylabel("requests")
    ax.legend(loc="upper right", fontsize="small")
    return None if engine or client else "no samples"


def _kv(ax, tl: Timeline) -> str | None:
    t, v = series(tl.of("engine"), "kv_usage")
    ax.plot(t, [x * 100 for x in v], label="KV cache usage")
    ax.set_ylabel("KV cache used (%)")
    ax.set_ylim(0, 105)
    return None if v else _why_missing(tl, "the engine reports no KV usage")


def _tokens(ax, tl: Timeline) -> str | None:
    engine = tl.of("engine")
    for field, label in (("generation_tokens", "output tok/s"), ("prompt_tokens", "prompt tok/s")):
        ax.plot(*rate(engine, field), label=label)
    ax.set_ylabel("tokens / s (engine counters)")
    ax.legend(loc="upper right", fontsize="small")
    return None if series(engine, "generation_tokens")[1] else _why_missing(tl, "no token counters")


def _gpu(ax, tl: Timeline) -> str | None:
    rows = tl.of("gpu")
    for d in (tl.header.get("gpu") or {}).get("devices", []):
        flat = [{"t_ms": r["t_ms"], **r["devices"][d["index"]]} for r in rows]
        ax.plot(*series(flat, "util"), label=f"GPU {d['index']} util %")
        limit = d.get("power_limit_w")
        t, w = series(flat, "power_w")
        ax.plot(t, [100 * x / limit for x in w] if limit else w,
                label=f"GPU {d['index']} power {'% of limit' if limit else 'W'}", linestyle="--")
    ax.set_ylabel("%")
    ax.legend(loc="upper right", fontsize="small")
    return None if rows else "no GPU samples"


def _why_missing(tl: Timeline, default: str) -> str:
    engine = tl.header.get("engine") or {}
    return f"engine /metrics absent: {engine.get('detail')}" if engine.get("status") != "ok" else default


PLOTS = {"queue.png": ("Requests: engine running / waiting, client in flight", _queue),
         "kv_usage.png": ("KV cache usage", _kv),
         "tokens_per_s.png": ("Token throughput", _tokens),
         "gpu.png": ("GPU utilization and power", _gpu)}


def plot_timeline(timeline: Timeline, out_dir: Path) -> list[Path]:
    """Write the plots; ``gpu.png`` only when the run had a GPU. Returns the paths."""
    plt = pyplot()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, (title, draw) in PLOTS.items():
        if name == "gpu.png" and timeline.status("gpu") != "ok":
            continue
        fig, ax = plt.subplots(figsize=(9, 3.2))
        note = draw(ax, timeline)
        if note:
            ax.text(0.5, 0.5, note, ha="center", va="center", transform=ax.transAxes)
        ax.set_title(title)
        ax.set_xlabel("seconds from the start of the run")
        ax.axvspan(0, timeline.duration_ms / 1000.0, color="0.93", zorder=0)  # the measured run
        fig.tight_layout()
        fig.savefig(out_dir / name, dpi=110)
        plt.close(fig)
        paths.append(out_dir / name)
    return paths
