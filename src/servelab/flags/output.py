"""``servelab bench``'s results group: where the result goes (``--label``, ``--save-result``,
``--result-dir``…), which metrics it reports (``--percentile-metrics``, ``--metric-percentiles``,
``--goodput``), telemetry, plots and the llm-d report; and the parsers of their values.

The flags ``OutputSpec`` is built from (``bench_serve.bench_spec`` builds it), kept apart
from the server, load and request flags as ``structured.py`` and ``stop.py`` are.
Light on purpose (argparse only at import): ``--help`` must stay instant.
"""

from __future__ import annotations

import argparse

PERCENTILE_METRICS = ("ttft", "tpot", "itl", "e2el", "client_queue_time", "e2el_including_client_queue")
SLO_NAMES = ("ttft", "tpot", "e2el")


def add_output_arguments(p: argparse.ArgumentParser, hidden: bool) -> None:
    """Result files, reported metrics, telemetry and plots. ``hidden``: a command that owns its runs'
    result files (and has its own "results" group, where they go) shows the rest as what they are."""
    g = p.add_argument_group("reported metrics, telemetry and plots" if hidden else "results")
    _add_result_files(g, hidden=hidden)
    g.add_argument("--metadata", metavar="KEY=VALUE", nargs="*", help="extra keys for the result JSON")
    g.add_argument("--percentile-metrics", default="ttft,tpot,itl",
                   help=f"metrics to report percentiles of, from {','.join(PERCENTILE_METRICS)} (default: %(default)s)")
    g.add_argument("--metric-percentiles", default="99", help="percentiles to report (default: %(default)s)")
    g.add_argument("--goodput", nargs="+", metavar="KEY:MS", help="SLOs for goodput: ttft:MS tpot:MS e2el:MS")
    g.add_argument("--disable-tqdm", action="store_true",
                   help="no live panel or progress line (the panel shows where stderr is a terminal; "
                        "SERVELAB_LIVE=1 forces it, SERVELAB_LIVE=0 draws the plain line instead)")
    g.add_argument("--no-telemetry", action="store_true",
                   help="do not sample the engine's /metrics, the GPU and the client during the run")
    g.add_argument("--telemetry-interval", type=float, default=0.25, metavar="SECONDS",
                   help="time between telemetry samples (default %(default)s)")
    g.add_argument("--gpu-hour-cost", type=float, default=None, metavar="DOLLARS",
                   help="price of one GPU-hour: adds cost per million output and total tokens (GPU-hours = "
                        "the engine's GPUs × wall time of the run, and of its steady window; the engine's GPUs: those "
                        "NVML sees holding its memory or computing)")
    g.add_argument("--plot-timeline", action="store_true",
                   help="write <result>.timeline.html: each request's prefill and inter-token gaps over time")
    g.add_argument("--timeline-itl-thresholds", default="25,50", metavar="MS,MS",
                   help="ITL colours of the timeline: green below the first, orange, red above the second "
                        "(default: %(default)s)")
    g.add_argument("--plot-dataset-stats", action="store_true",
                   help="write <result>.dataset_stats.png: prompt, output and total token histograms "
                        "(needs matplotlib)")


def _add_result_files(g, hidden: bool) -> None:
    """Where the result goes. ``hidden``: parsed (so a clear error can refuse them) but not offered."""
    def shown(text: str) -> str:
        return argparse.SUPPRESS if hidden else text

    g.add_argument("--label", default=None, help=shown("result label (default: the backend)"))
    g.add_argument("--save-result", action="store_true", help=shown("write the result JSON and per-request records"))
    g.add_argument("--save-detailed", action="store_true",
                   help=shown("also write per-request lists in the result JSON"))
    g.add_argument("--append-result", action="store_true", help=shown("append the result to --result-filename"))
    g.add_argument("--result-dir", default=None,
                   help=shown("folder of the result file (default: current). Every run streams its records "
                              "as they complete, saved or not: beside the result, or, unsaved, to "
                              ".servelab/last.records.jsonl there; after a kill, `servelab results recover DIR`"))
    g.add_argument("--result-filename", default=None,
                   help=shown("result file name (default: {label}-{rate}qps[-concurrency{N}]-{model}-{date}.json)"))
    g.add_argument("--llm-d-report", action="store_true",
                   help="also write each result as an llm-d Benchmark Report v0.2.1 (<result>.llm-d-report.json, "
                        "valid against its published schema; servelab's own figures under scenario.load.native)")


def parse_goodput(items: list[str] | None) -> dict[str, float]:
    from servelab.errors import InputError

    slo: dict[str, float] = {}
    for item in items or []:
        name, sep, value = item.partition(":")
        try:
            slo[name] = float(value)
        except ValueError:
            raise InputError(f"--goodput: expected KEY:MILLISECONDS, got {item!r}") from None
        if not sep or name not in SLO_NAMES:
            raise InputError(f"--goodput: unknown metric {name!r} (use {', '.join(SLO_NAMES)})")
        if slo[name] < 0:
            raise InputError(f"--goodput: {name} must be non-negative")
    return slo


def parse_percentiles(metrics: str, percentiles: str) -> tuple[list[str], list[float]]:
    from servelab.errors import InputError

    names = [m.strip() for m in metrics.split(",") if m.strip()]
    bad = [m for m in names if m not in PERCENTILE_METRICS]
    if bad:
        raise InputError(f"--percentile-metrics: unknown {bad[0]!r} (use {', '.join(PERCENTILE_METRICS)})")
    try:
        pcts = [float(p) for p in percentiles.split(",")]
    except ValueError:
        raise InputError(f"--metric-percentiles: expected numbers like 50,90,99, got {percentiles!r}") from None
    if any(not 0 <= p <= 100 for p in pcts):
        raise InputError("--metric-percentiles: each must be within 0..100")
    return names, pcts


def parse_itl_thresholds(text: str) -> tuple[float, float]:
    """``--timeline-itl-thresholds``: two increasing millisecond values, ``"25,50"``."""
    from servelab.errors import InputError

    try:
        values = tuple(float(t) for t in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 2 or not 0 <= values[0] <= values[1]:
        raise InputError(f"--timeline-itl-thresholds: expected two increasing values in ms like 25,50, got {text!r}")
    return values  # type: ignore[return-value]
