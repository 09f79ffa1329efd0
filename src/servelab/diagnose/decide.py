"""Run every rule; rank the verdicts; say what was checked and what could not be.

    diagnose(evidence(facts_from_result(result), timeline)) -> Diagnosis
"""

from __future__ import annotations

import statistics

from servelab.diagnose.evidence import Evidence
from servelab.diagnose.host import cpu_compute_bound, host_contention, host_line
from servelab.diagnose.gpu import GPU_RULES
from servelab.diagnose.prefix_cache import prefix_cache_eviction
from servelab.diagnose.rules import (PARTIAL, RULES, family, known_cap, mean, more_load, number,
                                     offered_unbounded, preemptions_text)
from servelab.diagnose.spans import spell
from servelab.diagnose.verdict import Diagnosis, Verdict, ranked

ALL_RULES = (host_contention, *RULES, prefix_cache_eviction, *GPU_RULES, cpu_compute_bound)

_SOURCE_NAMES = {"engine": "engine /metrics", "gpu": "GPU (NVML)", "telemetry": "engine, GPU and client"}


def diagnose(ev: Evidence) -> Diagnosis:
    verdicts = [v for v in (rule(ev) for rule in ALL_RULES) if v is not None]
    checked, not_checked = tuple(checked_lines(ev)), tuple(not_checked_lines(ev))
    if not verdicts:
        verdicts = [no_limit_found(ev, checked, not_checked) if ev.engine or ev.client else not_judged(ev, not_checked)]
    return Diagnosis(ranked(verdicts), checked, not_checked, ev.facts.simulated)


def not_judged(ev: Evidence, not_checked: tuple[str, ...]) -> Verdict:
    """No engine or client sample with work in it: nothing to judge a limit by. Saying
    "no limit" (or "offer more load") there would be a verdict on no evidence."""
    why = "; ".join(not_checked) or "the timeline holds no sample with a request in flight"
    return Verdict("not-judged", 0.0,
                   f"Cannot judge what limits this run: no engine or client samples to look at ({why}).",
                   {"not_checked": list(not_checked)},
                   "Re-run with telemetry on (the default; not --no-telemetry) and keep the timeline file beside the "
                   "result; a killed run's telemetry comes back with `servelab results recover DIR`.")


def no_limit_found(ev: Evidence, checked: tuple[str, ...], not_checked: tuple[str, ...]) -> Verdict:
    # Confidence falls with what could not be looked at: absent sources may hide the limit.
    conf = 0.6 if not not_checked else 0.3
    unbounded = offered_unbounded(ev)
    return Verdict("no-limit-found", conf, "No limit held for long: " + "; ".join(quiet_parts(ev)) + ".",
                   {"checked": list(checked), "not_checked": list(not_checked), "offered_unbounded": unbounded},
                   _after_no_limit(ev))


def _after_no_limit(ev: Evidence) -> str:
    """More load finds a limit only where nothing queued; a queue that held (≥ PARTIAL of the run)
    with no cap, budget or cache seen holding it needs the engine's limits stated, not more load."""
    e = ev.engine
    queued = spell(e.t_s, [w >= 1 for w in e.waiting], ev.tick_s).share if e is not None else 0.0
    if queued >= PARTIAL:
        return ("Requests queued, so more load would only lengthen the queue: state the engine's limits "
                "(diagnose --max-num-seqs N --max-num-batched-tokens N, the values it ran with) and diagnose again.")
    until = "a queue holds (the burst here cleared at once)" if queued else "something queues"
    return (f"To find the deployment's limit, {more_load(ev)} until {until}; a run that "
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
        peak, how = _peak(f, c)
        out.append(f"client in flight at most {peak}" + "".join(f" ({x})" for x in how) +
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
        peak, how = _peak(f, c)
        cap = f"cap {f.max_concurrency}" if f.max_concurrency else "no cap"
        out.append(f"client in flight mean {number(c.in_flight_avg)}, max {peak} "
                   f"({'; '.join([*how, cap])}), waiting for a slot mean {number(c.waiting_avg)}")
    if e is not None:
        out.append(_engine_line(e))
    for g in ev.gpus:
        if g.util:
            power = f", power mean {mean(g.power_w):.0f} W" if g.power_w else ""
            out.append(f"GPU {g.index} utilization mean {mean(g.util):.0f}%{power}")
    if f.host is not None:
        out.append(host_line(f.host))
    return out


def _peak(f, c) -> tuple[int, list[str]]:
    """The most in flight, and how it is known: the exact peak (a sweep over the records) where the
    result gives one, with the samples' own maximum beside it when they missed it (a 4 Hz sampler
    misses short peaks); else the samples' maximum, said to be sampled."""
    sampled = max(c.in_flight)
    if f.peak_concurrency is None:
        return sampled, ["sampled"]
    return f.peak_concurrency, ([f"exact, from the records; sampled {sampled}"]
                                if f.peak_concurrency != sampled else [])


def _engine_line(e) -> str:
    kv = f"KV usage mean {e.kv_avg:.0%}, max {max(e.kv):.0%}" if e.kv else "KV usage not reported"
    return (f"engine running mean {number(e.running_avg)}, max {max(e.running):.0f}; waiting mean "
            f"{number(e.waiting_avg)}, median {statistics.median(e.waiting):.0f}, max "
            f"{max(e.waiting):.0f}; {kv}; {preemptions_text(e.preemptions)}")


def not_checked_lines(ev: Evidence) -> list[str]:
    out = [f"{_SOURCE_NAMES.get(src, src)}: {why}" for src, why in ev.missing.items()]
    if ev.engine is not None and known_cap(ev.facts, family(ev.engine)) is None:
        cap = "slots (--parallel)" if family(ev.engine) == "llamacpp" else "max_num_seqs"
        out.append(f"{cap} not known (a cap is inferred from a plateau)")
    return out
