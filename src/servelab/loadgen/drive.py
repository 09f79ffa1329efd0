"""One benchmark run: prepare the requests, check the server, warm up, run the
schedule, and turn raw responses into ``RequestRecord``s handed to a sink.

What costs CPU per request — JSON encoding, SSE and JSON parsing, token counting —
happens before t0 or after the last response, except in a long run: there requests
are built when taken (past a budget) and responses parsed in slices while the run
goes on (loadgen/digest.py), so memory does not grow with the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import time
from dataclasses import dataclass, field

import numpy as np

from servelab.client import openai
from servelab.config import LoadSpec
from servelab.client.http import Pool
from servelab.client.sse import parse_events
from servelab.errors import InputError, ServerError
from servelab.loadgen.arrivals import arrival_offsets_ns, arrival_rng, trace_offsets_ns
from servelab.loadgen.digest import Digest
from servelab.loadgen.pacer import Attempt, Counters, RunOutcome, run_schedule
from servelab.loadgen.watch import Watch
from servelab.records import RecordSink, RequestRecord, SampleRequest


@dataclass(frozen=True, slots=True)
class BenchConfig:
    base_url: str
    endpoint: str
    kind: str  # "completions" | "chat"
    model: str  # the name sent in requests
    load: LoadSpec = LoadSpec()  # the rate and the concurrency cap: one source, the run's spec
    ignore_eos: bool = False
    extra_body: dict = field(default_factory=dict)
    headers: dict = field(default_factory=dict)
    seed: int = 0
    verify_tls: bool = True
    logprobs: int | None = None
    profile: bool = False  # POST /start_profile after the warm-ups, /stop_profile after the run
    # request id -> the model name it carries (--lora-modules); others carry ``model``
    request_models: dict = field(default_factory=dict)
    # OPENAI_API_KEY, sent as "Authorization: Bearer"; kept out of repr so no log or
    # result that prints a config can show it
    api_key: str | None = field(default=None, repr=False)

    def auth_headers(self) -> dict:
        """Authorization first, so a --header of the same name overrides it (as in vLLM)."""
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}


@dataclass(slots=True)
class BenchRun:
    """The outcome of one run, before metrics; its records went to the run's sink as they
    were made (whoever made the sink reads them there)."""

    outcome: RunOutcome
    wall_start: float  # time.time() at t0, the run's wall-clock anchor
    client_cpu_s: float
    server_models: dict | None = None  # the server's /v1/models answer, asked once per bench
    probes: list[RequestRecord] = field(default_factory=list)  # --probe-request-rate's requests
    stop_rules: dict | None = None  # the stop rules asked for and what they found (loadgen/watch.py)


def serialize(config: BenchConfig, s: SampleRequest, pool: Pool, request_id: str) -> bytes:
    model = config.request_models.get(s.request_id, config.model)
    body = openai.request_body(config.kind, model, s.prompt, s.expected_output_len,
                               config.ignore_eos, config.extra_body, config.logprobs)
    headers = {"Content-Type": "application/json", **config.auth_headers(), **config.headers,
               "X-Request-Id": request_id}
    return pool.build("POST", config.endpoint, body, headers)


# requests serialized before t0, in bytes; past it each is built when a sender takes it
# (~10 µs, in its client queue time, before its send stamp): built all ahead, a 500k-request
# run would hold a second copy of every prompt for the whole run
PREBUILT_BYTES = 8 << 20


class Payloads:
    """Request ``i``'s bytes: the first ones serialized before the clock starts, the rest when asked."""

    def __init__(self, config: BenchConfig, samples: list[SampleRequest], pool: Pool) -> None:
        if config.kind == "chat" and samples and not isinstance(samples[0].prompt, str):
            raise InputError("this dataset sends token ids (as vLLM's timed_trace does); "
                             "use a completions backend (--backend vllm or openai)")
        self.config, self.samples, self.pool = config, samples, pool
        self.built: list[bytes] = []
        size = 0
        for s in samples:
            if size > PREBUILT_BYTES:
                break
            self.built.append(serialize(config, s, pool, s.request_id))
            size += len(self.built[-1])

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> bytes:
        """Taken once each (a sender asks for request i once): a prebuilt one is let go."""
        if i < len(self.built) and self.built[i]:
            payload, self.built[i] = self.built[i], b""
            return payload
        s = self.samples[i]
        return serialize(self.config, s, self.pool, s.request_id)


def nothing_answered(base_url: str) -> str:
    """The one line for a server that is not there (yet)."""
    return (f"nothing answered at {base_url} (is the server running there? pass --ready-check-timeout-sec N "
            "to wait up to N s for one that is starting)")


async def fetch_models(pool: Pool, headers: dict | None = None) -> dict | None:
    """The server's ``/v1/models`` answer, for provenance and a default model; None when
    it answered something else; ServerError (the socket's error) when nothing answered."""
    resp = await pool.request("GET", "/v1/models", headers=headers)
    if resp.error and resp.status == 0:
        raise ServerError(resp.error)
    if resp.error or resp.status != 200:
        return None
    try:
        return json.loads(resp.body())
    except ValueError:
        return None


async def wait_ready(config: BenchConfig, pool: Pool, probe: bytes) -> None:
    """vLLM's ``--ready-check-timeout-sec``: retry one real request until it succeeds."""
    deadline = time.monotonic() + config.load.ready_check_timeout_s
    last = "no attempt"
    while time.monotonic() < deadline:
        resp = await pool.send(probe)
        if not resp.error and resp.status == 200:
            return
        last = resp.error or openai.http_error(resp.status, resp.reason, resp.body())
        await asyncio.sleep(1.0)
    raise ServerError(f"{config.base_url} not ready after {config.load.ready_check_timeout_s:.0f} s: {last}")


async def warm_up(config: BenchConfig, pool: Pool, probe: bytes) -> None:
    sem = asyncio.Semaphore(config.load.max_concurrency or config.load.num_warmups)

    async def one():
        async with sem:
            await pool.send(probe)

    await asyncio.gather(*(one() for _ in range(config.load.num_warmups)))


async def run_bench(config: BenchConfig, samples: list[SampleRequest], tokenizer,
                    stop: asyncio.Event, counters: Counters | None = None, *, sink: RecordSink,
                    on_start=None, offsets_ns=None, arrival_state: tuple | None = None,
                    server_models: dict | None = None, digest_age_s: float | None = None,
                    glance=None) -> BenchRun:
    """Run ``samples`` against the server; ``stop`` ends it early, keeping results.

    ``sink.add(i, record, t0_ns)`` takes each request's record as it is made.
    ``offsets_ns``: the schedule, when a caller drew it (a worker's shard of one
    schedule), else drawn here from the seed and ``arrival_state`` (``schedule``);
    ``on_start`` may return the absolute t0 (the workers' shared instant);
    ``server_models``: the /v1/models answer the caller fetched (once per bench), kept
    in the run; ``digest_age_s``: make records no later than that after their response
    ended (loadgen/digest.py); ``glance``: the live panel's (loadgen/glance.py), shown each
    answered response.
    """
    pool = Pool(config.base_url, verify_tls=config.verify_tls)
    counters = counters or Counters()
    digest = Digest(lambda a: to_record(config.kind, samples[a.index], a, tokenizer),
                    lambda i, record: sink.add(i, record, counters.t0_ns),
                    max_age_ns=None if digest_age_s is None else int(digest_age_s * 1e9), glance=glance)
    try:
        payloads = Payloads(config, samples, pool)
        # probes and warm-ups reuse the first prompt under their own ids, so a
        # server-side log never shows one request id twice
        probe = serialize(config, samples[0], pool, f"{samples[0].request_id}-warmup")
        if config.load.ready_check_timeout_s > 0:
            await wait_ready(config, pool, probe)
        if config.load.num_warmups > 0:
            await warm_up(config, pool, probe)
        if config.profile:
            await profile(config, pool, "start")
        offsets = offsets_ns if offsets_ns is not None else schedule(config, samples, arrival_state)
        await warm(config, pool, len(samples))
        t0 = on_start() if on_start is not None else None
        cpu0, wall0 = _cpu_s(), time.time()
        digesting = asyncio.ensure_future(digest.run())
        probing = start_probes(config, samples[0])
        watch = Watch(config.load, stop, counters)
        watching = asyncio.ensure_future(watch.run()) if watch.active else None
        try:
            outcome = await run_schedule(pool, payloads, offsets, config.load.max_concurrency, stop, counters,
                                         t0, on_done=_on_done(digest, watch))
        finally:  # the probes and the rules end with the run, however it ends
            digesting.cancel()
            if watching is not None:
                watching.cancel()
            probes = await probing.finish() if probing else []
        outcome.stop_reason = watch.reason
        cpu = _cpu_s() - cpu0  # the run's own; what is left to parse is off the clock
        await _raise_from(digesting)
        if config.profile:
            await profile(config, pool, "stop")
    finally:
        pool.close()
    digest.flush()  # a request cut in flight was not answered: not measured, not a failure
    probe_records = [to_record(config.kind, s, a, tokenizer) for s, a in probes]
    return BenchRun(outcome, wall0, cpu, server_models, probe_records, watch.section() if watch.active else None)


def _on_done(digest: Digest, watch: Watch):
    """Each answered attempt: to the digest, and to the stop rules when there are any."""
    if not watch.active:
        return digest.push

    def done(attempt: Attempt) -> None:
        watch.answered(attempt)
        digest.push(attempt)

    return done


async def warm(config: BenchConfig, pool: Pool, n: int) -> None:
    """Open the run's connections before t0 (``Pool.warm``); a refused one is one line."""
    try:
        await pool.warm(min(config.load.max_concurrency or n, n, 1024))
    except OSError:
        raise ServerError(nothing_answered(config.base_url)) from None


async def _raise_from(task: asyncio.Task) -> None:
    """A cancelled task's own failure (a bug while parsing), not lost with the cancel."""
    try:
        await task
    except asyncio.CancelledError:
        pass


async def profile(config: BenchConfig, pool: Pool, action: str) -> None:
    """vLLM's server profiler (served when it runs with --profiler-config): start or stop.
    A refusal is said in one line and the run goes on, as in vLLM."""
    print(f"{'Starting' if action == 'start' else 'Stopping'} profiler...", flush=True)
    resp = await pool.request("POST", f"/{action}_profile", headers={**config.auth_headers(), **config.headers})
    if not resp.error and resp.status == 200:
        print(f"Profiler {action}ed" if action == "start" else "Profiler stopped", flush=True)
        return
    why = resp.error or openai.http_error(resp.status, resp.reason, resp.body())
    print(f"servelab: WARNING /{action}_profile failed ({why}); is the server started with --profiler-config?",
          flush=True)


def schedule(config: BenchConfig, samples, arrival_state: tuple | None = None):
    """The run's arrival offsets: a trace's own send times when its requests carry
    them (vLLM's self-timed replay; --no-self-timed draws instead), else drawn from the
    seed as vLLM draws them — continuing the stream where the dataset left it
    (``arrival_state``: datasets/sample.Sample's; None, a fresh stream). A ramp
    (--ramp-up-strategy) gives each request its own rate, by its index. The same for
    one worker or many."""
    load = config.load
    if load.self_timed is not False and samples and all(getattr(s, "timestamp_s", None) is not None
                                                        for s in samples):
        return trace_offsets_ns([s.timestamp_s for s in samples])
    rng = arrival_rng(config.seed, arrival_state)
    ramp = None if load.ramp_up_strategy is None else (
        load.ramp_up_strategy, load.ramp_up_start_rps, load.ramp_up_end_rps)
    return arrival_offsets_ns(len(samples), load.request_rate, load.burstiness, rng, ramp)


class Probes:
    """``--probe-request-rate``: one-token requests ('Hi') sent one after another, a
    sleep of 1/rate between them, on their own connection and outside the concurrency
    cap, while the run lasts (vLLM's loop: so "rate" is at most that, never more)."""

    def __init__(self, config: BenchConfig, first: SampleRequest) -> None:
        self.config, self.pool = config, Pool(config.base_url, verify_tls=config.verify_tls)
        self.done: list[tuple[SampleRequest, Attempt]] = []
        self.stop = asyncio.Event()
        self.first_id = first.request_id
        self.task = asyncio.ensure_future(self._loop())

    async def _loop(self) -> None:
        interval = 1.0 / self.config.load.probe_request_rate
        while not self.stop.is_set():
            sample = SampleRequest("Hi", 1, 1, f"{self.first_id}-probe{len(self.done)}")
            attempt = Attempt(index=len(self.done), intended_ns=time.perf_counter_ns())
            attempt.dispatched_ns = attempt.intended_ns
            attempt.response = await self.pool.send(serialize(self.config, sample, self.pool, sample.request_id),
                                                    attempt.mark_sent)
            self.done.append((sample, attempt))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.stop.wait(), interval)

    async def finish(self) -> list[tuple[SampleRequest, Attempt]]:
        """Stop after the probe in flight (as vLLM waits for it) and hand back every probe."""
        self.stop.set()
        try:
            await self.task
        finally:
            self.pool.close()
        return self.done


def start_probes(config: BenchConfig, first: SampleRequest) -> Probes | None:
    return Probes(config, first) if config.load.probe_request_rate > 0 else None


_CUT = "interrupted before completion"


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def to_record(kind: str, sample: SampleRequest, a: Attempt, tokenizer) -> RequestRecord:
    # a request refused before its bytes went out (a dead server) has no send time: it
    # failed where it was released, so it counts once, as a failure, like any other
    base = dict(request_id=sample.request_id, prompt_len=sample.prompt_len,
                expected_output_len=sample.expected_output_len, intended_ns=a.intended_ns,
                dispatched_ns=a.dispatched_ns, sent_ns=a.sent_ns or a.dispatched_ns)
    resp = a.response
    if resp is None:  # cut in flight (multi-turn keeps its attempts; the digest never sees one)
        return RequestRecord(**base, done_ns=a.sent_ns, error=_CUT)
    if resp.error:
        return RequestRecord(**base, done_ns=resp.done_ns, error=resp.error, http_status=resp.status or None)
    if resp.status != 200:
        err = openai.http_error(resp.status, resp.reason, resp.body())
        return RequestRecord(**base, done_ns=resp.done_ns, error=err, http_status=resp.status)
    stream = openai.interpret(kind, parse_events(resp.reads))
    error = stream.error or _stream_problem(stream, resp.closed_early)
    text = "".join(stream.texts)
    n_out, source = _output_tokens(stream, text, tokenizer)
    if stream.prompt_tokens is not None:  # the server's count, as vLLM's client takes it
        base.update(prompt_len=int(stream.prompt_tokens), prompt_len_source="usage")
    return RequestRecord(
        **base, done_ns=resp.done_ns, token_ns=stream.token_ns,
        token_counts=split_counts(stream.texts, n_out, tokenizer), output_tokens=n_out,
        output_tokens_source=source, generated_text=text, error=error, http_status=200,
        finished=stream.finished, first_reasoning_ns=stream.first_reasoning_ns,
        # an answer's instant says something only after reasoning; left at its default
        # otherwise, a plain stream keeps nothing per request outside the tally's columns
        first_answer_ns=stream.first_answer_ns if stream.first_reasoning_ns else 0)


def _stream_problem(stream: openai.Stream, closed_early: bool) -> str | None:
    if not stream.token_ns:
        return "no token-bearing event received (cannot measure TTFT)"
    if closed_early and not stream.finished:
        return "connection closed mid-stream"
    return None


def _output_tokens(stream: openai.Stream, text: str, tokenizer) -> tuple[int, str]:
    if stream.completion_tokens is not None:
        return int(stream.completion_tokens), "usage"
    if tokenizer is not None:
        return len(tokenizer.encode(text)), "tokenizer"
    return len(stream.token_ns), "events"


def split_counts(texts: tuple[str, ...], total: int, tokenizer) -> tuple[int, ...]:
    """Tokens carried by each event. One each when events and tokens agree (the
    usual case); otherwise shares proportional to each event's re-tokenized
    length, rounded so they sum to ``total``."""
    n = len(texts)
    if n == 0 or total <= n:
        return (1,) * n
    weights = np.array([max(1, len(tokenizer.encode(t))) if tokenizer else 1 for t in texts], dtype=float)
    exact = weights / weights.sum() * total
    counts = np.maximum(1, np.floor(exact)).astype(int)
    for j in np.argsort(-(exact - np.floor(exact)))[: max(0, total - int(counts.sum()))]:
        counts[j] += 1
    return tuple(int(c) for c in counts)
