"""The fast mode's run: the same requests on the same arrival schedule as ``bench.py``,
given to the simulated engine instead of a server, turned into the same
``RequestRecord``s (no HTTP, no waiting).

Times: the simulation's virtual clock starts at a real ``perf_counter_ns`` anchor, t0,
so records look like a run that started now. Every request's record is what a perfect
client would have stamped: dispatched at its intended time (no schedule lag), sent when
it got a concurrency slot, one event per token, ``usage`` giving the output count.
"""

from __future__ import annotations

import time

from servelab.loadgen.drive import schedule
from servelab.loadgen.values import BenchConfig, BenchRun
from servelab.loadgen.pacer import RunOutcome
from servelab.records import RecordSink, RequestRecord, SampleRequest
from servelab.sim.model import DEFAULT_OUTPUT_LEN, EngineLimits, SimRequest, StepModel
from servelab.sim.prompt import pseudo_token_ids
from servelab.sim.simulate import Emission, SimResult, simulate


def sim_requests(config: BenchConfig, samples: list[SampleRequest], arrival_state: tuple | None = None
                 ) -> list[SimRequest]:
    offsets = schedule(config, samples, arrival_state)  # the real run's schedule, ramp included
    return [SimRequest(int(off), s.prompt_len, s.expected_output_len or DEFAULT_OUTPUT_LEN,
                       _ids(s))
            for off, s in zip(offsets, samples)]


def _ids(s: SampleRequest) -> tuple[int, ...]:
    # a trace replay's prompt already is token ids
    return pseudo_token_ids(s.prompt, s.prompt_len) if isinstance(s.prompt, str) else tuple(s.prompt)


def run_simulated(config: BenchConfig, samples: list[SampleRequest], limits: EngineLimits, model: StepModel,
                  sink: RecordSink, arrival_state: tuple | None = None
                  ) -> tuple[BenchRun, SimResult, list[RequestRecord]]:
    """The run, the simulation, and its records (each also added to ``sink``): the fast
    mode holds them all, and its telemetry timeline is drawn from them."""
    requests = sim_requests(config, samples, arrival_state)
    t0, wall0 = time.perf_counter_ns(), time.time()
    sim = simulate(requests, limits, model, config.load.max_concurrency)
    records = [to_record(s, r, e, t0) for s, r, e in zip(samples, requests, sim.emissions)]
    for i, r in enumerate(records):
        sink.add(i, r, t0)
    end = max((r.done_ns for r in records), default=t0)
    run = BenchRun(RunOutcome(t0, end), wall0, client_cpu_s=0.0)
    return run, sim, records


def to_record(s: SampleRequest, req: SimRequest, em: Emission, t0: int) -> RequestRecord:
    intended = t0 + req.arrival_ns
    tokens = tuple(t0 + t for t in em.token_ns)
    sent = t0 + em.sent_ns
    return RequestRecord(
        request_id=s.request_id, prompt_len=s.prompt_len, expected_output_len=s.expected_output_len,
        intended_ns=intended, dispatched_ns=intended, sent_ns=sent,
        done_ns=tokens[-1] if tokens else sent, token_ns=tokens, token_counts=(1,) * len(tokens),
        output_tokens=len(tokens), output_tokens_source="usage", error=em.error,
        http_status=400 if em.error else 200)
