"""The result's ``servelab`` section: what servelab adds to vLLM's keys (client fidelity,
the rules each figure used, provenance), and the console lines that say it."""

from __future__ import annotations

import hashlib
import math
import platform
from datetime import datetime
from pathlib import Path

from servelab import __version__
from servelab.client import openai
from servelab.config import BenchSpec
from servelab.diagnose.rules import client_limits
from servelab.loadgen import lora
from servelab.loadgen.values import BenchConfig, BenchRun
from servelab.measure.result import Finished
from servelab.measure.energy_cost import energy_section
from servelab.measure.energy_cost import lines as energy_lines
from servelab.metrics import steady
from servelab.metrics.summary import NS_PER_MS, stat
from servelab.metrics.tally import Tally
from servelab.results.store import finite
from servelab.telemetry import machine


def servelab_section(m: Finished, config: BenchConfig, tokenizer) -> dict:
    """What we add to vLLM's keys: client fidelity, the steady state, energy and cost, rules used,
    provenance (``m.timeline``: the run's telemetry, None without it)."""
    spec, run, tally, summary = m.spec, m.run, m.tally, m.summary
    duration_s = summary.duration_s if summary.duration_s == summary.duration_s else 0.0
    lags_ms = tally.lag_ns() / NS_PER_MS
    lag = stat(lags_ms, (50, 99))
    cpu_frac = run.client_cpu_s / duration_s if duration_s > 0 else 0.0
    sources = tally.sources()
    plateau = steady_of(spec, tally, run)
    return {
        "version": __version__,
        "wall_start": datetime.fromtimestamp(run.wall_start).isoformat(timespec="milliseconds"),
        "t0_perf_ns": run.outcome.t0_ns,  # records' *_ms are from here (perf_counter_ns clock)
        "interrupted": run.outcome.interrupted,
        # successes whose stream ended with neither a finish_reason nor [DONE] (counted, as vLLM does)
        "unfinished_streams": tally.unfinished(),
        "not_sent": run.outcome.not_sent,
        "schedule_lag_ms": {"mean": lag.mean, "p50": lag.percentiles[0][1], "p99": lag.percentiles[1][1],
                            "max": float(lags_ms.max()) if len(lags_ms) else 0.0},
        "steady_state": plateau,
        "energy": energy_section(m.timeline, summary, plateau, spec.output.gpu_hour_cost, m.simulated),
        "client_cpu_s": run.client_cpu_s,
        "client_cpu_fraction": cpu_frac,
        "client_bound": client_bound(cpu_frac, lag.percentiles[1][1], config),
        # usage: the server's usage.prompt_tokens (as vLLM counts); dataset: the sampler's count
        "prompt_tokens_source": tally.prompt_sources(),
        "rules": {"token_event": openai.TOKEN_EVENT_RULES[config.kind], "itl": summary.itl_rule,
                  "output_tokens": sources, "peak_output": "1 s bins from first send, weighted by tokens",
                  "peak_concurrency": "sweep-line over [sent, done)"},
        "provenance": provenance(spec, m.card, tokenizer),
        **lora_section(spec, config, tally.requests),
    }


def lora_section(spec: BenchSpec, config: BenchConfig, requests) -> dict:
    """``lora``: the assignment rule and each adapter's count over the run's ``requests`` (recycled
    lanes drew more ahead than they took; none without --lora-modules)."""
    modules = spec.request.lora_modules
    if not modules:
        return {}
    models = config.request_models
    return {"lora": {"assignment": spec.request.lora_assignment,
                     "requests": lora.counts({r.request_id: models[r.request_id] for r in requests
                                              if r.request_id in models}, modules)}}


def steady_of(spec: BenchSpec, tally: Tally, run: BenchRun) -> dict:
    """The run's plateau by its load shape (metrics/steady.py), latencies at p50, p99 and those asked."""
    load = spec.load
    shape = steady.shape_of(load.request_rate, load.max_concurrency, load.ramp_up_strategy)
    percentiles = sorted({50.0, 99.0, *spec.output.metric_percentiles})
    return steady.steady_state(tally, run.outcome.t0_ns, shape, percentiles)


def client_bound(cpu_frac: float, lag_p99_ms: float, config: BenchConfig) -> list[str]:
    """Why the client may limit this run, by the diagnosis's own rule (none: it did not)."""
    lag = None if math.isinf(config.load.request_rate) else lag_p99_ms
    return [reason for _, reason in client_limits(cpu_frac, 0.0, lag)]


def provenance(spec: BenchSpec, card: dict | None, tokenizer) -> dict:
    """Where the numbers came from: servelab, the command, the tokenizer and dataset, the
    server's /v1/models answer (``card``)."""
    path = spec.dataset.path
    return {
        "servelab_version": __version__, "python": platform.python_version(), "host": platform.node(),
        "argv": redact_headers(spec.argv),
        "flags": {k: finite(v, as_text=True) for k, v in spec.flags().items()},
        "tokenizer": getattr(tokenizer, "name", str(tokenizer)),
        "dataset_path": path, "dataset_sha256": file_sha256(path), "seed": spec.seed,
        "server_models": card,
    }


def redact_headers(argv) -> list[str]:
    """``--header`` values are credentials as often as not (vLLM redacts them too): keep
    each header's name, write its value as ***."""
    out, in_header = [], False
    for arg in argv:
        flag = arg.split("=", 1)[0]
        if arg.startswith("--"):
            in_header = flag == "--header"
            out.append("--header=***" if in_header and "=" in arg else arg)
            continue
        out.append(arg.split("=", 1)[0] + "=***" if in_header else arg)
    return out


def file_sha256(path) -> str | None:
    if not path or not Path(path).is_file():
        return None
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def footer(extra: dict) -> None:
    for line in [*steady.lines(extra["steady_state"]), *energy_lines(extra["energy"])]:
        print(line)
    lag = extra["schedule_lag_ms"]
    print(f"servelab: client CPU {extra['client_cpu_fraction']:.0%} of a core · schedule lag "
          f"p50 {lag['p50']:.2f} ms, p99 {lag['p99']:.2f} ms · ITL rule: {extra['rules']['itl']}")
    if extra["client_bound"]:
        print("servelab: WARNING the client may limit this run (" + "; ".join(extra["client_bound"])
              + "): the numbers can understate the server")
    if shared := machine.warning(extra.get("machine")):
        print(f"servelab: WARNING {shared}")
    if extra["unfinished_streams"]:
        print(f"servelab: {extra['unfinished_streams']} successful requests' streams ended without a "
              "finish_reason or [DONE] (counted as successes, as vLLM does)")
    if extra["interrupted"]:
        print(f"servelab: interrupted — results cover the requests completed so far "
              f"({extra['not_sent']} never sent)")
