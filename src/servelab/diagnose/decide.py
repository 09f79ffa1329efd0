"""Run every rule; rank the verdicts; say what was checked and what could not be.

    diagnose(evidence(facts_from_result(result), timeline)) -> Diagnosis
"""

from __future__ import annotations

import statistics

from servelab.diagnose.evidence import Evidence
from servelab.diagnose.rules import RULES, family, known_cap, mean, preemptions_text
from servelab.diagnose.verdict import Diagnosis, Verdict, ranked

_SOURCE_NAMES = {"engine": "engine /metrics", "gpu": "GPU (NVML)", "telemetry": "engine, GPU and client"}


def diagnose(ev: Evidence) -> Diagnosis:
    verdicts = [v for v in (rule(ev) for rule in RULES) if v is not None]
    checked, not_checked = tuple(checked_lines(ev)), tuple(not_checked_lines(ev))
    if not verdicts:
        verdicts = [no_limit_found(checked, not_checked)]
    return Diagnosis(ranked(verdicts), checked, not_checked)


def no_limit_found(checked: tuple[str, ...], not_checked: tuple[str, ...]) -> Verdict:
    # Confidence falls with what could not be looked at: absent sources may hide the limit.
    conf = 0.6 if not not_checked else 0.3
    return Verdict("no-limit-found", conf,
                   "No limit showed: no cap pinned, no queue at the engine, no full cache, no busy client.",
                   {"checked": list(checked), "not_checked": list(not_checked)},
                   "Offer more load (a higher --request-rate or --max-concurrency) until something queues; "
                   "a run that limits nothing measures the workload, not the deployment.")


def checked_lines(ev: Evidence) -> list[str]:
    f, c, e = ev.facts, ev.client, ev.engine
    out = []
    if f.client_cpu_fraction is not None:
        lag = f", schedule lag p99 {f.schedule_lag_p99_ms:.2f} ms" if f.schedule_lag_p99_ms is not None else ""
        out.append(f"client CPU {f.client_cpu_fraction:.0%} of a core{lag}")
    if c is not None:
        cap = f" (cap {f.max_concurrency})" if f.max_concurrency else " (no cap)"
        out.append(f"client in flight mean {mean(c.in_flight):.1f}, max {max(c.in_flight)}{cap}, "
                   f"waiting for a slot mean {mean(c.waiting):.1f}")
    if e is not None:
        out.append(_engine_line(e))
    for g in ev.gpus:
        if g.util:
            power = f", power mean {mean(g.power_w):.0f} W" if g.power_w else ""
            out.append(f"GPU {g.index} utilization mean {mean(g.util):.0f}%{power}")
    return out


def _engine_line(e) -> str:
    kv = f"KV usage mean {mean(e.kv):.0%}, max {max(e.kv):.0%}" if e.kv else "KV usage not reported"
    return (f"engine running mean {mean(e.running):.1f}, max {max(e.running):.0f}; waiting mean "
            f"{mean(e.waiting):.1f}, median {statistics.median(e.waiting):.0f}, max {max(e.waiting):.0f}; {kv}; "
            f"{preemptions_text(e.preemptions)}")


def not_checked_lines(ev: Evidence) -> list[str]:
    out = [f"{_SOURCE_NAMES.get(src, src)}: {why}" for src, why in ev.missing.items()]
    if ev.engine is not None and known_cap(ev.facts, family(ev.engine)) is None:
        cap = "slots (--parallel)" if family(ev.engine) == "llamacpp" else "max_num_seqs"
        out.append(f"{cap} not known (a cap is inferred from a plateau)")
    return out
