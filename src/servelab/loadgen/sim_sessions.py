"""``--simulate`` with agentic sessions: the fast mode's engine, its client the sessions' DAG.

The simulated engine (sim/simulate.py) takes who sends as an argument; here it is a
``DagClient`` that sends a call as the ``sessions`` driver would (loadgen/sessions.py):
a root ``wait_s`` after its session's start (the arrival schedule, one start per
session), any other call ``wait_s`` after the last of its parents ended; at most
``--max-concurrency`` in flight, the earliest due first (its index breaking a tie); under
``--max-sessions``, a session waits for a lane as the live driver's does. A
call that fails (too long for the KV cache) cuts its session: its dependants are never
sent, counted as abandoned. Prompts are the calls' own token ids
(``datasets.agentic.Blocks.prompt``), so the simulator's block manager sees the very
blocks a server would, and its prefix-cache hit rate can be checked against the ideal.
"""

from __future__ import annotations

import dataclasses
import heapq
import time

from servelab.client.http import Response
from servelab.datasets.agentic import Sessions
from servelab.loadgen.drive import schedule
from servelab.loadgen.pacer import Attempt, RunOutcome
from servelab.loadgen.sessions import Agentic
from servelab.loadgen.sim_drive import to_record
from servelab.loadgen.values import BenchConfig, BenchRun
from servelab.records import RecordSink, RequestRecord
from servelab.sim.model import EngineLimits, SimRequest, StepModel
from servelab.sim.simulate import SimResult, simulate


class DagClient:
    """Sends each call once its parents ended and its wait passed (sim.simulate.Client)."""

    def __init__(self, work: Sessions, starts_ns, cap: int | None, lanes: int | None = None) -> None:
        self.first = work.first()
        self.calls = [(si, k, c) for si, s in enumerate(work.sessions) for k, c in enumerate(s.calls)]
        self.kids = [[self.first[si] + j for j in kids] for si, s in enumerate(work.sessions)
                     for kids in s.children()]
        self.left = [len(c.parents) for _, _, c in self.calls]  # parents still running
        self.after = [0] * len(self.calls)  # the latest parent's end so far
        self.due: list[int | None] = [None] * len(self.calls)
        self.dead = [False] * len(self.calls)
        self.abandoned: dict[int, int] = {}  # session -> calls never sent for a failed parent
        self.ready: list[tuple[int, int]] = []  # (due, index)
        self.slots = [0] * cap if cap else None  # min-heap of times a slot became free
        self.starts = [int(t) for t in starts_ns]
        self.sizes = [len(s.calls) for s in work.sessions]
        self.open = list(self.sizes)  # per session: calls not yet ended or abandoned
        # --max-sessions: sessions take lanes in start order; one waits for a lane to free
        self.queued = list(range(len(work.sessions)))[lanes:] if lanes else []
        for si in range(len(work.sessions))[:lanes]:
            self._start(si, self.starts[si])

    def _start(self, si: int, at_ns: int) -> None:
        for j, call in enumerate(self.calls[self.first[si]:self.first[si] + self.sizes[si]]):
            if not call[2].parents:
                self._ready(self.first[si] + j, at_ns)

    def _ended(self, si: int, t_ns: int) -> None:
        """One of the session's calls ended or was abandoned; its last frees its lane at ``t_ns``."""
        self.open[si] -= 1
        if self.open[si] == 0 and self.queued:
            nxt = self.queued.pop(0)
            self._start(nxt, max(self.starts[nxt], t_ns))

    def _ready(self, i: int, after_ns: int) -> None:
        self.due[i] = after_ns + round(self.calls[i][2].wait_s * 1e9)
        heapq.heappush(self.ready, (self.due[i], i))

    def next_send_ns(self) -> int | None:
        if not self.ready:
            return None
        if self.slots is None:
            return self.ready[0][0]
        return max(self.ready[0][0], self.slots[0]) if self.slots else None

    def send(self) -> tuple[int, int]:
        t = self.next_send_ns()
        if self.slots is not None:
            heapq.heappop(self.slots)
        return heapq.heappop(self.ready)[1], t

    def done(self, index: int, t_ns: int, ok: bool) -> None:
        if self.slots is not None:
            heapq.heappush(self.slots, t_ns)
        for child in self.kids[index]:
            if not ok:
                self._abandon(child, t_ns)
                continue
            self.after[child] = max(self.after[child], t_ns)
            self.left[child] -= 1
            if self.left[child] == 0 and not self.dead[child]:
                self._ready(child, self.after[child])
        self._ended(self.calls[index][0], t_ns)

    def _abandon(self, i: int, t_ns: int) -> None:
        """A call whose parent failed, and every call that waits on it: never sent."""
        if self.dead[i]:
            return
        self.dead[i] = True
        si = self.calls[i][0]
        self.abandoned[si] = self.abandoned.get(si, 0) + 1
        for child in self.kids[i]:
            self._abandon(child, t_ns)
        self._ended(si, t_ns)


def run_simulated_sessions(config: BenchConfig, work: Sessions, limits: EngineLimits, model: StepModel,
                           sink: RecordSink) -> tuple[BenchRun, SimResult, list[RequestRecord], Agentic]:
    """The sessions on the simulated engine: the run, the simulation, the records of the calls
    sent (each also added to ``sink``, indexed as ``work.requests``), and what the sessions did."""
    requests = [SimRequest(0, c.input_len, c.output_len, tuple(work.blocks.prompt(s, k)))
                for s in work.sessions for k, c in enumerate(s.calls)]
    client = DagClient(work, schedule(config, work.sessions), config.load.max_concurrency, config.load.max_sessions)
    t0, wall0 = time.perf_counter_ns(), time.time()
    sim = simulate(requests, limits, model, client=client)
    agentic, records = Agentic(work, abandoned=client.abandoned, lanes=config.load.max_sessions), []
    for i, em in enumerate(sim.emissions):
        if em is None:
            continue
        si, k, _ = client.calls[i]
        record = to_record(work.requests[i], dataclasses.replace(requests[i], arrival_ns=client.due[i]), em, t0)
        record = dataclasses.replace(record, conversation_id=work.sessions[si].session_id, turn=k)
        agentic.attempts[i] = Attempt(i, record.intended_ns, record.dispatched_ns, record.sent_ns,
                                      Response(record.http_status, done_ns=record.done_ns, error=em.error))
        if em.error:
            agentic.failed[si] = agentic.failed.get(si, 0) + 1
        else:
            agentic.timing[i] = (record.ttft_ns, record.e2el_ns)
        sink.add(i, record, t0)
        records.append(record)
    end = max((r.done_ns for r in records), default=t0)
    not_sent = len(requests) - len(records)
    return BenchRun(RunOutcome(t0, end, False, not_sent), wall0, client_cpu_s=0.0), sim, records, agentic
