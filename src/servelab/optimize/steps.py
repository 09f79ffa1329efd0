"""One step of the method: a configuration measured, compared with the best so far by
compare's noise rule, and the verdict that sends the next change.

Pure over values (results in, a step's dict out), so the loop and its replay share it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from servelab.metrics.noise import BETTER, NOISE_FLOOR, TAIL_FACTOR, Spread, verdict
from servelab.optimize.config import Config, Move
from servelab.optimize.measure import Repeats
from servelab.optimize.quality_check import decision
from servelab.optimize.quality_check import why as why_quality

# objective -> (the result's key it reads, higher is better, what it is called)
OBJECTIVES = {"throughput": ("output_throughput", True, "output tok/s"),
              "goodput": ("request_goodput", True, "goodput req/s"),
              "latency": ("mean_ttft_ms", False, "mean TTFT ms")}
VALUES = ("output_throughput", "mean_ttft_ms", "mean_tpot_ms", "request_goodput", "request_throughput")


@dataclass(frozen=True, slots=True)
class Seen:
    """What a configuration gave: its spreads by result key, and what limited it."""

    config: Config
    values: dict[str, tuple[float, ...]]
    verdict: str
    evidence: dict
    lines: tuple[str, ...]
    reported: dict[str, str] = field(default_factory=dict)  # knob flag -> the value the engine's metrics state
    results: tuple[dict, ...] = ()  # its repeats' results: their answers judge a change (quality_check.py)

    def spread(self, key: str) -> Spread:
        return Spread(self.values.get(key) or (0.0,))


def seen(config: Config, m: Repeats) -> Seen:
    d = m.diagnosis
    top = (d.get("verdicts") or [{}])[0]
    lines = (top.get("summary", ""), *(d.get("checked") or ()))
    values = {k: tuple(float(r.get(k) or 0.0) for r in m.results) for k in VALUES}
    return Seen(config, values, d.get("verdict", "no-limit-found"), top.get("evidence") or {},
                tuple(x for x in lines if x), dict(m.reported), m.results)


def seen_from_step(step: dict) -> Seen:
    """A recorded step read back (resume): the decision is replayed, not re-made."""
    after = step.get("diagnosis_after") or {"verdict": step["verdict"], "evidence_values": step.get("evidence_values"),
                                            "evidence": step.get("evidence")}
    values = {k: tuple(v) for k, v in (step["result"].get("values") or {}).items()}
    return Seen(Config.from_dict(step["config"]), values, after["verdict"], after.get("evidence_values") or {},
                tuple(after.get("evidence") or ()), dict(step.get("engine_reported") or {}))


def compare(best: Seen, cand: Seen, objective: str) -> tuple[str, float | None]:
    """compare's verdict on the objective's metric, and the ratio of means (candidate / best)."""
    key, higher, _ = OBJECTIVES[objective]
    floor = NOISE_FLOOR * (1.0 if higher else TAIL_FACTOR)
    a, b = best.spread(key), cand.spread(key)
    gain = b.mean / a.mean if a.mean else None
    return verdict(a, b, higher, floor), gain


def step_dict(n: int, acted_on: Seen, move: Move | None, cand: Seen, m: Repeats | None,
              judged: tuple[str, float | None] | None,
              why: str, simulated: bool = False, quality: dict | None = None) -> dict:
    """The contract's STEP: the verdict acted on and its evidence, the change, what it gave, kept or not
    (faster beyond noise, and not blocked by its quality: ``quality_check.judge``)."""
    noise, gain = judged if judged else (None, None)
    result = {**(m.summary() if m else {}), "values": {k: list(v) for k, v in cand.values.items()}}
    reported = {"engine_reported": dict(cand.reported)} if cand.reported else {}  # only where the engine said
    step = {**reported, "n": n, "verdict": acted_on.verdict, "evidence": list(acted_on.lines),
            "evidence_values": acted_on.evidence, "change": move.to_dict() if move else None,
            "config": cand.config.to_dict(), "result": result,
            "gain": round(gain, 4) if gain is not None else None, "noise_verdict": noise,
            "kept": noise == BETTER and not (quality or {}).get("blocks"), "why": why, "simulated": simulated,
            "quality": quality,
            # what limited the candidate itself: the next verdict, if it is kept
            "diagnosis_after": None if move is None else {"verdict": cand.verdict, "evidence": list(cand.lines),
                                                          "evidence_values": cand.evidence}}
    if move is not None:  # the baseline is the start, not a decision
        step["decision"] = decision(step)
    return step


def why_text(move: Move, judged: tuple[str, float | None], objective: str, first: Move | None = None,
             quality: dict | None = None) -> str:
    noise, gain = judged
    _, _, name = OBJECTIVES[objective]
    ratio = f"{gain:.2f}×" if gain is not None else "no ratio"
    label = (f"{move.label}, with {first.label} (alone it moved the limit but bought nothing)" if first
             else move.label)
    said = why_quality(quality) if quality else ""
    if noise == BETTER and not (quality or {}).get("blocks"):
        return f"{label}: {name} {ratio} the best so far, better beyond noise{said} — kept"
    if noise == BETTER:
        return f"{label}: {name} {ratio} the best so far, better beyond noise{said}"
    return f"{label}: {name} {ratio} the best so far, {noise}{said} — reverted"
