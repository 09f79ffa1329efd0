"""A verdict names one limit, with its evidence and the next experiment.

Verdict ids are stable (scripts and reports key on them):

    host-contention          the machine's CPUs were full and the client or replicas starved of them
    client-concurrency-cap   the client's --max-concurrency, not the engine, limits the load
    scheduler-cap            requests wait while the batch is full (max_num_seqs, or the token budget)
    kv-capacity              the KV cache is full: preemptions, or near-full usage with a queue
    prefix-cache-eviction    an agentic run's prefix cache finds well below the trace's ideal
                             hit rate, the cache full or too small for the trace (prefix_cache.py)
    client-bound             the client itself (CPU, schedule lag) limits the run
    cpu-compute-bound        a CPU engine's cores were full with its own work: its compute limit
    gpu-underutilized        the GPU idles under load: too little batching
    memory-bandwidth-bound   the GPU is busy and hot: bytes per token, not batching, limit it
    no-limit-found           nothing above was seen; says what was checked
    not-judged               no engine or client samples to judge by: says why, names no limit

A diagnosis of a simulated run says so (``simulated``): first on its console line, and in
its JSON — its numbers came from a model of the scheduler, not an engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

IDS = ("host-contention", "client-bound", "kv-capacity", "prefix-cache-eviction", "scheduler-cap", "client-concurrency-cap",
       "cpu-compute-bound", "memory-bandwidth-bound", "gpu-underutilized", "no-limit-found", "not-judged")


@dataclass(frozen=True, slots=True)
class Verdict:
    id: str
    confidence: float  # 0–1: how sure the rule is that this is what limits the run
    summary: str  # one sentence, quoting the numbers
    evidence: dict = field(default_factory=dict)  # the numbers, by name, for --json
    next: str = ""  # the next experiment to run

    @property
    def level(self) -> str:
        return "high" if self.confidence >= 0.75 else "medium" if self.confidence >= 0.5 else "low"

    def to_dict(self) -> dict:
        return {"id": self.id, "confidence": round(self.confidence, 2), "level": self.level,
                "summary": self.summary, "evidence": self.evidence, "next": self.next}


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """Verdicts, most confident first (ties in ``IDS`` order); what was checked; what was not."""

    verdicts: tuple[Verdict, ...]
    checked: tuple[str, ...] = ()
    not_checked: tuple[str, ...] = ()
    simulated: str | None = None  # what produced a simulated run's numbers; None: measured

    @property
    def top(self) -> Verdict:
        return self.verdicts[0]

    def to_dict(self) -> dict:
        said = {"simulated": self.simulated} if self.simulated else {}
        return {"verdict": self.top.id, **said, "verdicts": [v.to_dict() for v in self.verdicts],
                "checked": list(self.checked), "not_checked": list(self.not_checked)}


def ranked(verdicts: list[Verdict]) -> tuple[Verdict, ...]:
    return tuple(sorted(verdicts, key=lambda v: (-round(v.confidence, 6), IDS.index(v.id))))


def render(d: Diagnosis) -> str:
    """The text block printed by ``servelab diagnose`` and at the end of ``bench``."""
    top = d.top
    label = f" — SIMULATED ({d.simulated})" if d.simulated else ""
    lines = [f"servelab diagnosis: {top.id} (confidence {top.confidence:.2f}, {top.level}){label}",
             f"  {top.summary}", f"  next: {top.next}"]
    for v in d.verdicts[1:]:
        lines.append(f"  also {v.id} ({v.confidence:.2f}, {v.level}): {v.summary}")
    if d.checked:
        lines.append("  checked: " + "; ".join(d.checked))
    if d.not_checked:
        lines.append("  not checked: " + "; ".join(d.not_checked))
    return "\n".join(lines)
