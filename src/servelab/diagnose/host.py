"""A saturated host, named only when it is the cause.

The result's machine share (``telemetry/machine.py``) says how busy all CPUs were and
with whose work. Full CPUs mean different things by who needed them:

* a CPU engine (vLLM's CPU build, llama.cpp) is meant to use the cores, and keeps them
  busy at any batch, as a GPU reads 100 % utilized at batch 1: busy is not saturated.
  Full CPUs are its compute limit (``cpu-compute-bound``) only when no cap pins the
  batch (``pinned.pinned``: running below every cap, nothing waiting for a slot, in all
  but a burst) — with a cap pinned, the cap is the verdict and a larger batch may use
  the same cores better; whether it did is the next run's to measure (``optimize``
  raises the cap and keeps the change only beyond noise);
* the host is named first (``host-contention``) only when the client or the replicas
  were starved of it: other programs took ≥ 25 % of the machine (the bench's own
  neighbour warning), the replicas' threads outnumber the cores, or the client's
  schedule lag shows it waited for a core to send. Others on the machine starve a
  CPU engine's compute directly; beside an engine elsewhere (a GPU, the mock) they
  reach only the client, so there the host ranks first only when nothing else was
  seen limiting (a client that kept its cap full, or an engine queue at its cap,
  was not starved into that shape) — it stays an "also" line below them.

A busy host with none of these, under a GPU engine, is not a verdict: the machine line
under ``checked:`` shows it.
"""

from __future__ import annotations

from servelab.diagnose.evidence import Evidence, Host
from servelab.diagnose.pinned import pinned
from servelab.diagnose.rules import LAG_P99_LIMIT_MS, late_lag_ms
from servelab.diagnose.verdict import Verdict


def starved(ev: Evidence) -> list[tuple[str, str]]:
    """(reason, what to do) for each sign that the run waited for a core on a saturated host."""
    h, lag = ev.facts.host, late_lag_ms(ev.facts)
    if h is None or not h.saturated:
        return []
    found = []
    if h.starved_by_others:
        found.append((f"other programs took {h.others:.0%} of the machine",
                      "stop them, or measure on a quiet machine"))
    if h.oversubscribed:
        found.append((f"{h.replicas} replica(s) × {h.threads} threads exceed its {h.cpus} cores",
                      f"give each replica at most {max(h.cpus // h.replicas, 1)} cores, or run fewer replicas"))
    if lag is not None and lag > LAG_P99_LIMIT_MS:
        found.append((f"the client's schedule lag p99 was {lag:.1f} ms (it waited for a core to send)",
                      "give the client its own core (taskset, or --workers on spare cores)"))
    return found


def host_contention(ev: Evidence) -> Verdict | None:
    found, h = starved(ev), ev.facts.host
    if not found:
        return None
    # 0.85: first over the client's cap and over partial or inferred engine caps (a tie goes to it,
    # IDS order), below only a known cap or a full cache that held all run (0.9), whose queue a
    # starved host slows but does not make. 0.4: below every limit a rule can see.
    late = (late_lag_ms(ev.facts) or 0.0) > LAG_P99_LIMIT_MS
    conf = 0.85 if h.cpu_engine or late else 0.4
    return Verdict("host-contention", conf,
                   f"The machine's {h.cpus} CPUs were {h.busy:.0%} busy and this run was starved of them: "
                   + "; ".join(r for r, _ in found) + ". Every figure here includes waiting for a core.",
                   _numbers(h), "Re-run after you " + "; ".join(n for _, n in found) + ".")


def cpu_compute_bound(ev: Evidence) -> Verdict | None:
    h = ev.facts.host
    if h is None or not (h.cpu_engine and h.saturated) or starved(ev) or pinned(ev) is not False:
        return None
    return Verdict("cpu-compute-bound", 0.8,
                   f"The engine computes on this machine's CPUs, and all {h.cpus} were {h.busy:.0%} busy "
                   f"(servelab and the engine {h.busy - h.others:.0%}, other programs {h.others:.0%}): the cores "
                   "are the engine's compute limit, as a busy GPU would be: no cap pinned the batch (running stayed "
                   "below every cap, with nothing waiting for a slot).",
                   _numbers(h),
                   "More throughput needs less work per token or more compute: a smaller or quantized model, more "
                   "cores per replica (fewer replicas), or a GPU. More concurrency helps only as far as larger "
                   "batches use the same cores better.")


def _numbers(h: Host) -> dict:
    return {"cpus": h.cpus, "busy_fraction": round(h.busy, 4), "others_fraction": round(h.others, 4),
            "cpu_engine": h.cpu_engine, "threads": h.threads, "replicas": h.replicas}


def host_line(h: Host) -> str:
    """The machine, as the ``checked:`` line shows it."""
    threads = f", {h.replicas} replica(s) × {h.threads} thread(s) each" if h.threads else ""
    engine = "a CPU engine" if h.cpu_engine else "no engine seen computing on these CPUs"
    return (f"machine {h.cpus} CPUs {h.busy:.0%} busy (servelab and the engine {h.busy - h.others:.0%}, "
            f"others {h.others:.0%}; {engine}{threads})")
