"""Run every rule; rank the verdicts; say what was checked and what could not be.

    diagnose(evidence(facts_from_result(result), timeline)) -> Diagnosis
"""

from __future__ import annotations

import statistics

from servelab.diagnose.evidence import Evidence
from servelab.diagnose.host import cpu_compute_bound, host_contention, host_line
from servelab.diagnose.gpu import GPU_RULES
from servelab.diagnose.rules import (PARTIAL, RULES, family, known_cap, mean, more_load, offered_unbounded,
                                     preemptions_text)
from servelab.diagnose.spans import spell
from servelab.diagnose.verdict import Diagnosis, Verdict, ranked

ALL_RULES = (host_contention, *RULES, *GPU_RULES, cpu_compute_bound)

_SOURCE_NAMES = {"engine": "engine /metrics", "gpu": "GPU (NVML)", "telemetry": "engine, GPU and client"}


def diagnose(ev: Evidence) -> Diagnosis:
    verdicts = [v for v in (rule(ev) for rule in ALL_RULES) if v is not None]
    checked, not_checked = tuple(checked_lines(ev)), tuple(not_checked_lines(ev))
    if not verdicts:
        verdicts = [no_limit_found(ev, checked, not_checked)]
    return Diagnosis(ranked(verdicts), checked, not_checked)


def no_limit_found(ev: Evidence, checked: tuple[str, ...], not_checked: tuple[str, ...]) -> Verdict:
    # Confidence falls with what could not be looked at: absent sources may hide the limit.
    conf = 0.6 if not not_checked else 0.3
    seen = quiet_parts(ev)
    summary = ("No limit held for long: " + "; ".join(seen) + "." if seen else
               "No limit could be seen: there are no engine or client samples to look at.")
    unbounded = offered_unbounded(ev)
    return Verdict("no-limit-found", conf, summary,
                   {"checked": list(checked), "not_checked": list(not_checked), "offered_unbounded": unbounded},
                   f"To find the deployment's limit, {more_load(ev)} until something queues; a run that "
                   "limits nothing measures the workload, not the deployment.")


def quiet_parts(ev: Evidence) -> list[str]:
    """What the evidence shows, in the words of a run that nothing limited — each one true of it."""
    f, c, e = ev.facts, ev.client, ev.engine
    out = []
    if e is not None:
        queue = spell(e.t_s, [w >= 1 for w in e.waiting], ev.tick_s)
        out.append("no queue at the engine" if not queue.share else
                   f"requests waited at the engine for {queue.text()}" +
                   (" (a burst being admitted, not a limit)" if queue.share < PARTIAL else
                    ", but no cap, token budget or full cache was seen holding them"))
        seqs = known_cap(f, family(e))
        out.append(f"running at most {max(e.running):.0f}" + (f" of its cap {seqs}" if seqs else ""))
        out.append(f"KV usage at most {max(e.kv):.0%}" if e.kv else "KV usage not reported")
    if c is not None:
        out.append(f"client in flight at most {max(c.in_flight)}" +
                   (f", below its cap {f.max_concurrency} most of the run" if f.max_concurrency else ", no cap"))
    if f.client_cpu_fraction is not None:
        out.append(f"client CPU {f.client_cpu_fraction:.0%} of a core")
    return out


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
    if f.host is not None:
        out.append(host_line(f.host))
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
