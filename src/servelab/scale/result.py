"""``scale``'s result: the runs' raw records in, one JSON-ready dict and its table out.

Times in the result are seconds from the together run's start instant (its t0, shared
by every replica). The single-replica rate is replica 0's, alone, in its own window
(the same rule with N = 1), once per repeat; its spread is the noise.
"""

from __future__ import annotations

import platform
from datetime import datetime

from servelab import __version__
from servelab.errors import InputError
from servelab.metrics import noise
from servelab.metrics.summary import tpot_ns
from servelab.metrics.window import (NS_PER_S, Window, common_window, count, edges, efficiency, latency_ms,
                                     token_rate)
from servelab.records import RequestRecord

WINDOW_RULE = ("window = [latest ramp-up end, earliest drain start); ramp-up end = the later of a replica's "
               "first completed request and the last first token of the requests sent before it; drain start = "
               "its last send. Output tokens counted by their arrival in the window; requests by their last token.")
EFFICIENCY_RULE = "efficiency = total output tok/s in the window / (N × replica 0's output tok/s alone, mean of repeats)"
PERCENTILES = (50, 99)
# All CPUs ≥ 90 % busy while the replicas ran together: no core sat idle for long (the rule
# diagnose/evidence.Host.saturated uses), so N replicas on this host could not do N times the work.
HOST_SATURATED = 0.90
SIMULATED = "SIMULATED: engine 'sim' is servelab's vLLM V1 scheduler model; these numbers are not measured"


def build(facts: dict, engines: list[dict], alone: list, together: list) -> dict:
    """The result from replica 0's alone runs and the together runs (scale/local.JobRun)."""
    single = [_single(run) for run in alone]
    replicas, window = _together(together)
    rates = [r["output_tok_s"] for r in replicas]
    total = {"output_tok_s": sum(rates), "req_s": sum(r["req_s"] for r in replicas)}
    base = noise.Spread(tuple(s["output_tok_s"] for s in single))
    eff = efficiency(total["output_tok_s"], len(replicas), base.mean)
    machine = _machine(together)
    return {"servelab_scale": 1, "date": datetime.now().isoformat(timespec="seconds"), **facts,
            "simulated": SIMULATED if any(e.get("kind") == "sim" for e in engines) else None,
            "window_rule": WINDOW_RULE, "efficiency_rule": EFFICIENCY_RULE,
            "noise_rule": f"compare's: ranges over repeats apart AND means more than {noise.NOISE_FLOOR:.0%} apart",
            "single": {"replica": 0, "repeats": single, "output_tok_s": _spread(base)},
            "together": {"window": window, "replicas": replicas, "total": total, "machine": machine},
            "efficiency": eff, "verdict": _verdict(base, noise.Spread(tuple(rates))),
            "engines": engines, "provenance": {"servelab_version": __version__, "host": platform.node(),
                                               "python": platform.python_version()}}


def _machine(runs: list) -> dict | None:
    """How busy the machine was while all replicas ran: the busiest of their measured shares
    (each run measures the whole machine over its own span, telemetry/machine.py)."""
    shares = [m for r in runs if (m := (r.result.get("servelab") or {}).get("machine"))]
    return max(shares, key=lambda m: m.get("busy_fraction") or 0.0) if shares else None


def explain(result: dict) -> list[str]:
    """What the efficiency says, in words: how much N replicas gave over one, and why not N times."""
    eff, n, verdict = result["efficiency"], result["replicas"], result["verdict"]
    if eff is None:
        return ["scaling efficiency: - (replica 0 alone delivered nothing to compare with)"]
    lines = [f"scaling efficiency: {eff:.1%} — {verdict}: together the {n} replicas delivered "
             f"{eff * n:.2f}× what one replica alone did in its window (N× would be 100%)"]
    host = host_line(result)
    if host:
        lines.append(host)
    elif verdict.startswith("below"):
        lines.append("the replicas slowed each other beyond noise: they share something (cores, memory "
                     "bandwidth, the clients' machine); each replica's diagnosis says what limited it")
    return lines


def host_line(result: dict) -> str | None:
    """One line when the host was saturated while all ran: then the machine, not the engine config, set the total."""
    m = result["together"].get("machine")
    if not m or (m.get("busy_fraction") or 0.0) < HOST_SATURATED:
        return None
    return (f"the machine's {m['cpus']} CPUs were {m['busy_fraction']:.0%} busy while all {result['replicas']} "
            f"replicas ran (servelab, its clients and engines {m.get('ours_fraction') or 0.0:.0%}, other programs "
            f"{m.get('others_fraction') or 0.0:.0%}): the replicas shared saturated cores, so the host, not the "
            "engine config, limits the total — scale across machines (--ray) or give each replica its own cores")


def _single(run) -> dict:
    """Replica 0 alone: the same window rule, with one replica."""
    window = _window([run.records], [run.replica])
    c = count(run.records, window)
    return {"output_tok_s": c.output_tok_s, "req_s": c.req_s, "window_s": window.length_s,
            "tokens": c.tokens, "tokens_cut": c.tokens_cut, "result": _result_dir(run)}


def _together(runs: list) -> tuple[list[dict], dict]:
    window = _window([r.records for r in runs], [r.replica for r in runs])
    t0 = runs[0].t0_ns
    replicas = [_replica(run, window, t0) for run in runs]
    cut = {k: sum(r["in_window"][k] for r in replicas) for k in ("tokens_cut", "requests_cut")}
    return replicas, {"start_s": _rel(window.start_ns, t0), "end_s": _rel(window.end_ns, t0),
                      "length_s": window.length_s, **cut, "timeline": timeline(runs, t0)}


def timeline(runs: list, t0: int, points: int = 120) -> dict:
    """Each replica's output tok/s over the run, in bins of a round size (for the report's plot)."""
    last = max((r.token_ns[-1] for run in runs for r in run.records if r.success and r.token_ns), default=t0)
    span_s = max((last - t0) / NS_PER_S, 0.1)
    bin_s = next((b for b in (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0) if span_s / b <= points), 60.0)
    bins = int(span_s // bin_s) + 1
    return {"bin_s": bin_s, "output_tok_s": [token_rate(run.records, t0, int(bin_s * NS_PER_S), bins) for run in runs]}


def _window(per_replica: list[list[RequestRecord]], names: list[int]) -> Window:
    spans = []
    for records, name in zip(per_replica, names):
        span = edges(records)
        if span is None:
            raise InputError(f"replica {name} completed no request: no window to count in (see its console.txt)")
        spans.append(span)
    window = common_window(spans)
    if window.empty:
        raise InputError(f"no common window: a replica's drain began {(window.start_ns - window.end_ns) / NS_PER_S:.2f} s "
                         "before the last one's ramp-up ended; give each replica more requests than it runs at once "
                         "(--num-prompts well above --max-concurrency, or a finite --request-rate)")
    return window


def _replica(run, window: Window, t0: int) -> dict:
    span, c = edges(run.records), count(run.records, window)
    result = run.result
    return {"replica": run.replica, "output_tok_s": c.output_tok_s, "req_s": c.req_s,
            "in_window": {"tokens": c.tokens, "requests": c.requests, "tokens_cut": c.tokens_cut,
                          "requests_cut": c.requests_cut},
            "ramp_end_s": _rel(span.ramp_end_ns, t0), "drain_start_s": _rel(span.drain_start_ns, t0),
            "latency_ms": latency(run.records, window),
            "whole_run": {k: result.get(k) for k in ("completed", "failed", "output_throughput", "duration")},
            "diagnosis": (result.get("servelab", {}).get("diagnosis") or {}).get("verdict"),
            "result": _result_dir(run)}


def latency(records: list[RequestRecord], window: Window) -> dict:
    """TTFT, TPOT and E2EL percentiles of the requests completed in the window (steady state)."""
    done = [r for r in records if r.success and r.token_ns and window.start_ns <= r.token_ns[-1] < window.end_ns]
    return latency_ms({"ttft": [r.ttft_ns for r in done], "e2el": [r.e2el_ns for r in done],
                       "tpot": [t for r in done if (t := tpot_ns(r)) is not None]}, PERCENTILES)


def _verdict(alone: noise.Spread, per_replica: noise.Spread) -> str:
    """Each replica's rate together against one alone, by compare's rule."""
    found = noise.verdict(alone, per_replica, higher_is_better=True)
    return {noise.WORSE: "below 100% beyond noise", noise.BETTER: "above 100% beyond noise",
            noise.NOISE: "within noise of 100%",
            noise.UNKNOWN: "noise unknown (needs --repeats ≥ 2 and ≥ 2 replicas)"}[found]


def _spread(s: noise.Spread) -> dict:
    return {"mean": s.mean, "min": s.lo, "max": s.hi, "noise_pct": 100 * s.half_range / s.mean if s.mean else None}


def _rel(t_ns: int, t0_ns: int) -> float:
    return (t_ns - t0_ns) / NS_PER_S


def _result_dir(run) -> str | None:
    path = run.result.get("servelab", {}).get("records_file")
    return str(path).rsplit("/", 1)[0] if path else None


def render(result: dict) -> str:
    """The pasteable table: per replica, the total, the single replica, the efficiency."""
    w, n = result["together"]["window"], result["replicas"]
    head = (f"{n} replicas, common window {w['length_s']:.2f} s (t0+{w['start_s']:.2f} s … t0+{w['end_s']:.2f} s); "
            f"cut outside it: {w['tokens_cut']} tokens, {w['requests_cut']} requests")
    rows = [("replica", "port", "out tok/s", "req/s", "TTFT p50/p99 ms", "TPOT p50 ms", "ramp end/drain start t0+s",
             "diagnosis")]
    engines = result["engines"]
    for r in result["together"]["replicas"]:
        lat = r["latency_ms"]
        rows.append((str(r["replica"]), str(engines[r["replica"]]["base_url"].rsplit(":", 1)[-1]),
                     f"{r['output_tok_s']:.1f}", f"{r['req_s']:.3f}", _pair(lat["ttft"]), _one(lat["tpot"]),
                     f"{r['ramp_end_s']:.2f}/{r['drain_start_s']:.2f}", r["diagnosis"] or "-"))
    total = result["together"]["total"]
    rows.append(("total", "", f"{total['output_tok_s']:.1f}", f"{total['req_s']:.3f}", "", "", "", ""))
    single = result["single"]["output_tok_s"]
    tail = [f"replica 0 alone ({len(result['single']['repeats'])} repeats), in its own steady window: "
            f"{single['mean']:.1f} out tok/s (min {single['min']:.1f}, max {single['max']:.1f}, "
            f"±{single['noise_pct'] or 0:.1f}%); the per-run lines above are whole-run figures, ramp and drain "
            "included", *explain(result)]
    banner = [SIMULATED, ""] if result.get("simulated") else []
    return "\n".join([*banner, head, "", _table(rows), "", *tail, *_on_ray(result.get("ray"))])


def _on_ray(ray: dict | None) -> list[str]:
    """Where the replicas ran (``scale --ray``): nodes, and the clock offsets' worst bound."""
    if not ray:
        return []
    nodes = " ".join(f"{r['replica']}→{r['node'][:8]}" for r in ray["replicas"])
    bound = max((r["clock_bound_ns"] or 0 for r in ray["replicas"]), default=0) / 1e3
    return [f"on Ray ({ray['nodes']} nodes; {ray['placement'].split('; ')[-1]}): {nodes}; "
            f"clock offsets within ±{bound:.0f} µs"]


def _pair(s: dict | None) -> str:
    return "-" if s is None else f"{s['p50']:.0f}/{s['p99']:.0f}"


def _one(s: dict | None) -> str:
    return "-" if s is None else f"{s['p50']:.1f}"


def _table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)
