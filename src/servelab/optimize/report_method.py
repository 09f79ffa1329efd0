"""The optimize note's last two sections, from optimize.json's fields: the method (what was
fixed, what was free, how a gain was judged, what it cost, why it stopped) and the limits
of the answer (the loop's own, then what follows from how the run went).

They say how the answer was reached, not what it is: apart from ``report_text``, which
says the answer (summary, steps, final configuration, operating point), and built on its
shared pieces (``band``, ``budget_text``, ``share``). Pure functions of the record, as there.
"""

from __future__ import annotations

from servelab.optimize.report_text import band, budget_text, share
from servelab.search.slo import text as slo_text

# Where a reader finds how far the simulator's numbers are from a real engine's (measured, dated there).
SIM_ERROR = ("SIMULATED steps are predictions of servelab's simulated engine, not measurements: calibrated "
             "on the embedded engine it came within 12 % on output tok/s and 17 % on mean TTFT of held-out "
             "runs (docs/sim.md, accuracy table); uncalibrated it is a roofline — an upper bound of "
             "throughput and a lower bound of latency.")


def fixed_text(fixed: dict) -> str:
    """``dataset=random, input_len=128, …``: the scalar fields (a request rate of null is inf: JSON has no
    infinity), then the workload's own flags when recorded."""
    pairs = [f"{k}={'inf' if v is None and k == 'request_rate' else v}" for k, v in fixed.items()
             if not isinstance(v, (list, dict)) and (v is not None or k == "request_rate")]
    argv = fixed.get("argv")
    return ", ".join(pairs) + (f" (flags: {' '.join(map(str, argv))})" if argv else "")


def method(doc: dict) -> list[tuple[str, str]]:
    """What was fixed, what was free, how a gain was judged, what it cost, why it stopped."""
    obj, eng, noise = doc["objective"], doc["engine"], doc["noise"]
    slo = slo_text(obj.get("slo") or {})
    fixed = fixed_text(doc["workload"].get("fixed") or {})
    free = "; ".join(doc["workload"].get("free") or ["the client's concurrency and workers"])
    plan = doc.get("plan_check")
    return [("objective", f"{obj['kind']}{f' (SLO: {slo})' if slo else ''} — {obj.get('why') or 'as asked'}"),
            ("engine", f"{eng['kind']}, {eng.get('model', '?')}; "
                       + ("restarted for each engine change" if eng.get("restartable", True)
                          else "external: never restarted, its configuration untouched")),
            ("plan check", plan["line"] if plan else "not run"),
            ("fixed", f"the workload's shape: {fixed}; every configuration got the same requests (same seed)"),
            ("free", f"{free}: reported beside the engine's configuration"),
            ("repeats", f"{noise.get('repeats', '?')} per configuration; each repeat is one measured run"),
            ("noise rule", f"{noise.get('rule', '')} Floor used: {share(band(doc))}."),
            ("budget", budget_text(doc["budget"])),
            ("stopped because", doc["stopped_because"] or "not yet: still running")]


def limits(doc: dict, simulated: bool) -> list[str]:
    """The loop's own limits first, then what follows from how this run went."""
    out = list(doc.get("limits") or [])
    if simulated and not any("SIMULATED" in x for x in out):  # the loop may have said it already
        out.append(SIM_ERROR)
    if not doc["engine"].get("restartable", True):
        out.append("The engine's own settings were not tried: a better engine configuration may exist.")
    if not doc.get("operating_point"):
        skipped = doc.get("operating_point_skipped")
        out.append(f"No operating point{f' ({skipped})' if skipped else ''}: the load this configuration serves "
                   "before latency grows is unknown.")
    out += ["A gain is a ratio of means over repeats on this machine, for this workload: another prompt/answer "
            "length mix may meet another limit first.",
            "A change reverted as within noise may still help a little: with more repeats a smaller real gain "
            "can be told from noise."]
    return out
