"""The rules: pure functions ``Evidence -> Verdict | None``, one per limit.

A verdict never contradicts the evidence it prints. So each rule marks the
loaded samples in which its limit held (the cap bound *and* requests waited),
and quotes when and for how long (``spans.spell``): a cap that binds for a
stated share of a long-tailed run is a (partial) cap, said with its share and
times, never "no cap pinned" beside a checked line that shows it. Confidence
is a number, not a probability: rules set it so that the clearest evidence
ranks first (a cap seen at its known value beats a cap inferred from a plateau;
a cap that held all run beats one that held for a tenth of it).
"""

from __future__ import annotations

import bisect
import math
import statistics
from dataclasses import dataclass

from servelab.diagnose import changes
from servelab.diagnose.evidence import Evidence
from servelab.diagnose.spans import Spell, spell
from servelab.diagnose.verdict import Verdict

# A limit that held in ≥ 60 % of the loaded run set the pace of most of it: full confidence.
PINNED = 0.6
# Held in ≥ 10 % of it, a limit is named, as partial, with its share and times. Below, a queue is
# the ramp of a burst (all requests due at t0 take a few steps to admit), not a limit.
PARTIAL = 0.10
# The client's cap is vetoed when the engine queued in half of the samples where the cap bound:
# then the engine's own limit binds there (scheduler-cap / kv-capacity name it), not the client's.
QUEUED = 0.5
# A step carrying ≥ 80 % of max_num_batched_tokens is full: with a queue behind it, chunked
# prefill fills the rest of the budget with the next prompt; 80 %, not 100 %, because a sample
# averages the steps since the last one, and the queue may have emptied among them.
TOKEN_FULL = 0.8
KV_HIGH = 0.90  # KV usage (fraction) that counts as full
KV_ROOM = 0.80  # below this the cache has room
FLAT = 0.9  # share of loaded samples at one running value: a count limit, not memory
CPU_LIMIT = 0.90  # client CPU (fraction of one core) above which the client may limit
CPU_HOT = 0.95  # a sampler tick this busy is saturated …
CPU_HOT_SHARE = 0.25  # … and this share of saturated ticks is a problem
LAG_P99_LIMIT_MS = 10.0  # schedule lag p99 above which arrivals were late


def mean(xs) -> float:
    return statistics.fmean(xs) if xs else 0.0


def share(xs, pred) -> float:
    return sum(1 for x in xs if pred(x)) / len(xs) if xs else 0.0


def rounded(x, nd: int = 3):
    return None if x is None else round(float(x), nd)


def client_limits(cpu: float | None, hot: float, lag_p99_ms: float | None) -> list[tuple[float, str]]:
    """The one client-bound rule (the bench's warning and the diagnosis both use it):
    (confidence, reason) for each sign that the client, not the server, set the pace.
    ``cpu``: fraction of a core; ``hot``: share of saturated sampler ticks; ``lag_p99_ms``:
    None when arrivals had no schedule to be late for (rate inf: all due at t0)."""
    found = []
    if cpu is not None and cpu >= CPU_LIMIT:
        found.append((0.85 if cpu >= 0.97 else 0.7, f"client CPU {cpu:.0%} of a core"))
    if hot >= CPU_HOT_SHARE:
        found.append((0.7, f"{hot:.0%} of sampler ticks at ≥ {CPU_HOT:.0%} of a core"))
    if lag_p99_ms is not None and lag_p99_ms > LAG_P99_LIMIT_MS:
        found.append((0.85 if lag_p99_ms > 5 * LAG_P99_LIMIT_MS else 0.7, f"schedule lag p99 {lag_p99_ms:.1f} ms"))
    return found


def late_lag_ms(f) -> float | None:
    """The schedule lag p99 when arrivals had a schedule to be late for; None at rate inf (all due at t0)."""
    return f.schedule_lag_p99_ms if math.isfinite(f.request_rate) else None


def client_bound(ev: Evidence) -> Verdict | None:
    f, c = ev.facts, ev.client
    cpu = f.client_cpu_fraction if f.client_cpu_fraction is not None else (mean(c.cpu) if c and c.cpu else None)
    hot = share(c.cpu, lambda x: x >= CPU_HOT) if c else 0.0
    lag = late_lag_ms(f)
    found = client_limits(cpu, hot, lag)
    if not found:
        return None
    return Verdict(
        "client-bound", max(conf for conf, _ in found),
        "The client limits this run (" + "; ".join(r for _, r in found) + "): the numbers understate the server.",
        {"client_cpu_fraction": rounded(cpu), "cpu_saturated_share": rounded(hot), "schedule_lag_p99_ms": rounded(lag)},
        changes.says("vllm", "client-bound"))


def partial(conf: float, held: Spell) -> float:
    """A limit's confidence, scaled by how much of the run it held: half at no share, whole from PINNED."""
    return conf * (0.5 + 0.5 * min(1.0, held.share / PINNED))


def client_concurrency_cap(ev: Evidence) -> Verdict | None:
    cap, c = ev.facts.max_concurrency, ev.client
    if cap is None or c is None:
        return None
    at_cap = [x >= cap for x in c.in_flight]
    held = spell(c.t_s, at_cap, ev.tick_s)
    if held.share < PARTIAL:
        return None
    evidence = {"max_concurrency": cap, "in_flight_mean": rounded(c.in_flight_avg, 2), "at_cap_share": rounded(held.share),
                "bound": held.to_dict(), "client_waiting_mean": rounded(c.waiting_avg, 2),
                "max_num_seqs": ev.facts.max_num_seqs}
    head = (f"The client's --max-concurrency {cap} limits the load: in flight at the cap for {held.text()} "
            f"({number(c.in_flight_avg)} in flight on average over the run, {number(c.waiting_avg)} more waiting "
            "for a slot)")
    room = _engine_room(ev, cap, [t for t, m in zip(c.t_s, at_cap) if m], evidence)
    if room is None:
        return None
    conf, tail, next_step = room
    return Verdict("client-concurrency-cap", partial(conf, held), head + tail, evidence, next_step)


def _engine_room(ev: Evidence, cap: int, bound_t: list[float], evidence: dict) -> tuple[float, str, str] | None:
    """(confidence, sentence, next step) when the client's cap bound; None when the engine's own
    limit bound first: it queued then (scheduler-cap / kv-capacity name it), or, unseen, its
    max_num_seqs is below the cap (in flight past it must wait there: scheduler-cap infers it).
    The engine "had room" only where running stayed below its max_num_seqs: one equal to the
    client's cap is pinned with it (both caps bind; the knob table raises both in one step)."""
    e, seqs, host = ev.engine, ev.facts.max_num_seqs, ev.facts.host
    cpus = (f"; its {host.cpus} CPUs were {host.busy:.0%} busy, as a CPU engine's are at any batch"
            if host is not None and host.cpu_engine and host.saturated else "")
    if e is None:
        if seqs is not None and seqs < cap:
            return None
        both = (f"; the engine's max_num_seqs is {seqs} too, so it ran at most that many: both caps pin the "
                "batch" if seqs == cap else "")
        # Unseen is not idle: with the machine's CPUs full, a larger batch may still use them better
        # (CI: the API server answered /metrics for 42% of the run, on 2 cores 98% busy).
        said = f"; the engine's state is unknown (/metrics: {ev.missing.get('engine') or 'no samples'}){both}"
        if cpus and seqs != cap:
            return 0.5, said + cpus + ".", changes.says("vllm", "client-concurrency-cap:cpu").format(c=cap, c2=2 * cap)
        return 0.5, said + ".", _raise_concurrency(cap, seqs)
    if share(bound_t, lambda t: _at(e.t_s, e.waiting, t) >= 1) >= QUEUED:
        return None
    kv_max = max(e.kv) if e.kv else None
    evidence.update(engine_waiting_mean=rounded(e.waiting_avg, 2), engine_running_mean=rounded(e.running_avg, 2),
                    kv_usage_max=rounded(kv_max))
    kv = f", KV usage at most {kv_max:.0%}" if kv_max is not None else " (KV usage not reported)"
    if seqs is not None and seqs <= cap:  # no room past the engine's own cap: raise both
        full = share(bound_t, lambda t: _at(e.t_s, e.running, t) >= seqs)
        said = (f"running sat at it for {full:.0%} of that time, so both caps pin the batch" if full >= QUEUED else
                "past it, requests will queue there")
        return 0.6, (f"; the engine's max_num_seqs is {seqs} too ({number(e.running_avg)} running on average, at "
                     f"most {max(e.running):.0f}): {said}{cpus}."), _raise_concurrency(cap, seqs)
    where = f" of its max_num_seqs {seqs}" if seqs is not None else ""
    room = (f"; the engine queued nothing: {number(e.waiting_avg)} waiting, {number(e.running_avg)} running{where}"
            if seqs is None else f"; the engine's scheduler had room: {number(e.waiting_avg)} waiting, "
            f"{number(e.running_avg)} running{where}") + kv
    if cpus:  # full cores: a larger batch uses them better, no further
        return 0.5, room + cpus + ".", changes.says("vllm", "client-concurrency-cap:cpu").format(c=cap, c2=2 * cap)
    return (0.85 if kv_max is None or kv_max < KV_ROOM else 0.55), room + ".", _raise_concurrency(cap, seqs)


def _at(times: tuple[float, ...], xs: tuple[float, ...], t: float) -> float:
    """The value of a gauge at time t: its latest sample at or before t (its first, before any)."""
    return xs[max(bisect.bisect_right(times, t) - 1, 0)] if xs else 0.0


def _raise_concurrency(cap: int, seqs: int | None = None) -> str:
    """The knob table's sentence: the client's cap alone, or with the engine's when that is no higher."""
    if seqs is not None and seqs <= cap:
        return changes.says("vllm", "client-concurrency-cap:seqs").format(c=cap, c2=2 * cap, s=seqs)
    return changes.says("vllm", "client-concurrency-cap").format(c=cap, c2=2 * cap, c4=4 * cap)


def number(x: float) -> str:
    """A mean as a verdict prints it: one decimal, two below 1 (0.03 in flight is not "0.0")."""
    return f"{x:.2f}" if 0 < abs(x) < 1 else f"{x:.1f}"


@dataclass(frozen=True, slots=True)
class Limit:
    """One engine limit found by scheduler_cap: how sure, what it is, what to raise, and when it held."""

    conf: float
    what: str
    next: str
    evidence: dict
    marks: tuple[bool, ...]  # per loaded engine sample: it held then
    held: Spell


def scheduler_cap(ev: Evidence) -> Verdict | None:
    e = ev.engine
    if e is None:
        return _cap_seen_by_client(ev)
    found = [x for x in (_count_cap(ev), _token_budget(ev)) if x is not None and x.held.share >= PARTIAL]
    found = found or [x for x in (_unknown_budget(ev),) if x is not None]
    if not found:
        return None
    top = max(found, key=lambda x: (x.held.share, x.conf))
    conf = partial(top.conf, top.held)
    conf -= 0.1 if e.kv and mean(e.kv) >= KV_HIGH else 0.0  # memory may be next (or now)
    conf -= 0.3 if e.preemptions else 0.0  # preempting: the cache, not the count, binds
    also = "".join(f" (and {x.what} for {x.held.text()})" for x in found if x is not top)
    waiting = [w for w, m in zip(e.waiting, top.marks) if m]
    running = [r for r, m in zip(e.running, top.marks) if m]
    kv = f"KV usage at most {max(e.kv):.0%}" if e.kv else "KV usage not reported"
    summary = (f"Requests wait at the engine while {top.what}, for {top.held.text()}{also}: then "
               f"{statistics.median(waiting):.0f} waiting (median; max {max(waiting):.0f}) and "
               f"{statistics.median(running):.0f} running; over the whole run running mean {number(e.running_avg)}, "
               f"waiting mean {number(e.waiting_avg)}; {kv}, {preemptions_text(e.preemptions)}.")
    evidence = {**top.evidence, "at_cap_share": rounded(top.held.share), "bound": top.held.to_dict(), **_queue_numbers(e)}
    return Verdict("scheduler-cap", conf, summary, evidence, top.next)


# Without engine samples, a known count cap is still seen from the client: requests in flight
# past max_num_seqs (or llama.cpp's slots) cannot all run, so the excess waits at the engine.
# 0.6: the count is the client's, the engine's own gauges were not seen (0.9 when they were).
UNSEEN_CAP = 0.6


def _cap_seen_by_client(ev: Evidence) -> Verdict | None:
    f, c = ev.facts, ev.client
    engine = "llamacpp" if f.slots else "vllm"
    seqs = known_cap(f, engine)
    if c is None or seqs is None:
        return None
    over = [x > seqs for x in c.in_flight]
    held = spell(c.t_s, over, ev.tick_s)
    if held.share < PARTIAL:
        return None
    name, next_step, key = KNOWN_CAP[engine]
    during = [x for x, m in zip(c.in_flight, over) if m]
    summary = (f"The engine's gauges were not seen ({ev.missing.get('engine') or 'no samples'}), but the client "
               f"kept more requests in flight than {name.format(s=seqs)} lets run, for {held.text()}: then {statistics.median(during):.0f} "
               f"in flight (median; max {max(during)}), so at least {statistics.median(during) - seqs:.0f} waited at "
               "the engine. Inferred from the client's count.")
    evidence = {key: seqs, "limit": key, "inferred_from": "client in flight", "at_cap_share": rounded(held.share),
                "bound": held.to_dict(), "client_in_flight_mean": rounded(c.in_flight_avg, 2),
                "client_in_flight_max": max(c.in_flight)}
    return Verdict("scheduler-cap", partial(UNSEEN_CAP, held), summary, evidence,
                   next_step.format(s=seqs, s2=2 * seqs, s4=4 * seqs))


def _limit(ev: Evidence, conf: float, what: str, next_step: str, evidence: dict, marks: list[bool]) -> Limit:
    return Limit(conf, what, next_step, evidence, tuple(marks), spell(ev.engine.t_s, marks, ev.tick_s))


def known_cap(facts, engine: str) -> int | None:
    """The engine's stated cap on running requests: llama.cpp's slots, vLLM's max_num_seqs."""
    return facts.slots if engine == "llamacpp" else facts.max_num_seqs


def family(e) -> str:
    """Which engine answered: the prefix of the name its running count came from."""
    return (e.names.get("running") or "vllm:").split(":", 1)[0]


# What to raise when a plateau in running is the cap, by engine family (the knob table's sentences).
PLATEAU_NEXT = {"vllm": changes.SAYS_PLATEAU, "llamacpp": changes.SAYS_SLOTS_PLATEAU}


# A known cap, by engine family: (what it is called, what to raise, the evidence key).
KNOWN_CAP = {
    "vllm": ("max_num_seqs {s}", changes.SAYS_SEQS, "max_num_seqs"),
    "llamacpp": ("llama.cpp's {s} slots (--parallel {s}, from its log)", changes.SAYS_SLOTS, "slots"),
}


def _count_cap(ev: Evidence) -> Limit | None:
    """Running at the known cap (max_num_seqs, llama.cpp's slots) with requests waiting; without
    a known cap, at a plateau: the most ever running while requests waited, held in ≥ PINNED of
    those samples (a peak touched once is not a cap)."""
    e, engine = ev.engine, family(ev.engine)
    seqs = known_cap(ev.facts, engine)
    queued = [r for r, w in zip(e.running, e.waiting) if w >= 1]
    if seqs is None:
        if not queued or max(queued) < 1 or share(queued, lambda r: r >= max(queued)) < PINNED:
            return None
        return _plateau(ev, max(queued), engine)
    name, next_step, key = KNOWN_CAP.get(engine, KNOWN_CAP["vllm"])
    return _limit(ev, 0.9, f"running sits at {name.format(s=seqs)}",
                  next_step.format(s=seqs, s2=2 * seqs, s4=4 * seqs), {key: seqs, "limit": key},
                  [w >= 1 and r >= seqs for r, w in zip(e.running, e.waiting)])


def _plateau(ev: Evidence, plateau: float, engine: str) -> Limit:
    e = ev.engine
    next_step = PLATEAU_NEXT.get(engine, PLATEAU_NEXT["vllm"]).format(p=f"{plateau:.0f}", p2=f"{2 * plateau:.0f}")
    return _limit(ev, 0.7, f"running plateaus at {plateau:.0f} (the engine's cap is not known, so it is inferred "
                           "from the plateau)", next_step, {"plateau": plateau, "limit": "plateau"},
                  [w >= 1 and r >= plateau for r, w in zip(e.running, e.waiting)])


def _token_budget(ev: Evidence) -> Limit | None:
    """Steps that carry the whole max_num_batched_tokens while requests wait: chunked prefill
    admits no more per step than the budget, so the budget, not the count, holds the queue."""
    e, budget = ev.engine, ev.facts.max_num_batched_tokens
    if not budget or not any(t is not None for t in e.step_tokens):
        return None
    full = [w >= 1 and t is not None and t >= TOKEN_FULL * budget for w, t in zip(e.waiting, e.step_tokens)]
    seqs = known_cap(ev.facts, family(e))
    below = f" with running below max_num_seqs {seqs}" if seqs else ""
    return _limit(ev, 0.85, f"each engine step carries the full token budget (max_num_batched_tokens {budget}){below}",
                  changes.SAYS_BATCHED.format(b=budget, b2=2 * budget),
                  {"max_num_batched_tokens": budget, "limit": "max_num_batched_tokens",
                   "tokens_per_step": rounded(e.tokens_per_step, 1)}, full)


def _unknown_budget(ev: Evidence) -> Limit | None:
    """vLLM queued below its known max_num_seqs with room in the KV cache and no preemptions:
    what is left to hold the queue is the token budget, which this result does not state."""
    e, f = ev.engine, ev.facts
    seqs = known_cap(f, family(e))
    if family(e) != "vllm" or seqs is None or f.max_num_batched_tokens or e.preemptions:
        return None
    if e.kv and max(e.kv) >= KV_HIGH:
        return None
    found = _limit(ev, 0.45, f"running stays below max_num_seqs {seqs} with room in the KV cache — the token "
                             "budget (max_num_batched_tokens, not stated in the result) is what is left to hold them",
                   changes.SAYS_UNKNOWN, {"max_num_seqs": seqs, "limit": "unknown"},
                   [w >= 1 and r < seqs for r, w in zip(e.running, e.waiting)])
    return found if found.held.share >= PARTIAL else None


def preemptions_text(n: float | None) -> str:
    return "preemptions not reported" if n is None else f"{n:.0f} preemptions"


def _queue_numbers(e) -> dict:
    """Means over the run window; the median and maxima over the loaded samples."""
    return {"running_mean": rounded(e.running_avg, 2), "running_max": max(e.running),
            "waiting_mean": rounded(e.waiting_avg, 2), "waiting_median": statistics.median(e.waiting),
            "waiting_max": max(e.waiting), "kv_usage_mean": rounded(e.kv_avg) if e.kv else None,
            "kv_usage_max": rounded(max(e.kv)) if e.kv else None, "preemptions": e.preemptions}


def kv_capacity(ev: Evidence) -> Verdict | None:
    e = ev.engine
    if e is None or (not e.kv and not e.preemptions):
        return None
    kv_mean, kv_max = (e.kv_avg, max(e.kv)) if e.kv else (None, None)
    full = [p > 0 or (kv is not None and kv >= KV_HIGH and w >= 1)
            for p, kv, w in zip(e.preempted or [0.0] * len(e.waiting), e.kv or [None] * len(e.waiting), e.waiting)]
    held = spell(e.t_s, full, ev.tick_s)
    if e.preemptions:
        conf, head = (0.9 if (kv_max or 0) >= KV_HIGH else 0.85), f"{e.preemptions:.0f} preemptions during the run"
    elif held.share >= PARTIAL:  # full with requests waiting, for a stated share of the run
        flat = max(share(e.running, lambda r, v=v: r == v) for v in set(e.running))
        # A running count that never moves while the cache is "full" looks like a count limit.
        conf, head = partial(0.45 if flat >= FLAT else 0.55, held), "no preemptions yet, but requests queue"
    elif kv_max is not None and kv_max >= 0.95:
        conf, head = 0.35, "it reached this at its peak, with no preemptions"
    else:
        return None
    when = f" (full with requests waiting, or preempting, for {held.text()})" if held.share else ""
    usage = f"KV usage mean {kv_mean:.0%}, max {kv_max:.0%}" if e.kv else "KV usage not reported"
    return Verdict("kv-capacity", conf,
                   f"The KV cache is the limit: {head}{when}; {usage}; {number(e.waiting_avg)} waiting on average.",
                   {**_queue_numbers(e), "bound": held.to_dict()}, free_kv(ev))


def free_kv(ev: Evidence) -> str:
    """The knob table's sentence for this engine (the CPU build's KV budget is an environment variable)."""
    tokens, host = ev.facts.kv_cache_tokens, ev.facts.host
    engine = family(ev.engine) if ev.engine is not None else "vllm"
    kind = changes.family_kind(engine, cpu_engine=host is not None and host.cpu_engine)
    now = f" (it holds {tokens:,} tokens now)" if tokens else ""
    return changes.says(kind, "kv-capacity").format(now=now)


def offered_unbounded(ev: Evidence) -> bool:
    """Was every request offered at once? Rate inf, and no client cap, or one never reached."""
    f, c = ev.facts, ev.client
    if math.isfinite(f.request_rate):
        return False
    return f.max_concurrency is None or (c is not None and max(c.in_flight) < f.max_concurrency)


def more_load(ev: Evidence) -> str:
    """What 'offer more load' means for this run; never that, to a run whose load was unbounded."""
    if offered_unbounded(ev):
        return ("every request was already offered at once (--request-rate inf, no cap reached), so send more "
                "or longer requests (--num-prompts, longer prompts)")
    return "raise the offered load (a higher --request-rate or --max-concurrency)"


RULES = (client_bound, kv_capacity, scheduler_cap, client_concurrency_cap)  # GPU rules: diagnose/gpu.py
