"""The rules: pure functions ``Evidence -> Verdict | None``, one per limit.

Each rule decides from shares of loaded samples, so ramp-up and drain do not
hide a limit that held for most of the run: a state is *pinned* when it holds
in at least ``PINNED`` of the samples it is judged over. Confidence is a
number, not a probability: rules set it so that the clearest evidence ranks
first (a cap seen at its known value beats a cap inferred from a plateau).
"""

from __future__ import annotations

import math
import statistics

from servelab.diagnose.evidence import Evidence
from servelab.diagnose.verdict import Verdict

PINNED = 0.6  # share of samples at a cap for it to count as binding
QUEUED = 0.5  # share of loaded engine samples with a waiting request for a queue to count
KV_HIGH = 0.90  # KV usage (fraction) that counts as full
KV_ROOM = 0.80  # below this the cache has room
FLAT = 0.9  # share of loaded samples at one running value: a count limit, not memory
CPU_LIMIT = 0.90  # client CPU (fraction of one core) above which the client may limit
CPU_HOT = 0.95  # a sampler tick this busy is saturated …
CPU_HOT_SHARE = 0.25  # … and this share of saturated ticks is a problem
LAG_P99_LIMIT_MS = 10.0  # schedule lag p99 above which arrivals were late
GPU_UTIL_LOW = 50.0  # % busy under load
GPU_UTIL_HIGH = 80.0
GPU_POWER_HIGH = 0.70  # of the enforced power limit
GPU_MEM_BUSY = 40.0  # % of time the memory controller was busy


def mean(xs) -> float:
    return statistics.fmean(xs) if xs else 0.0


def share(xs, pred) -> float:
    return sum(1 for x in xs if pred(x)) / len(xs) if xs else 0.0


def _r(x, nd: int = 3):
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


def client_bound(ev: Evidence) -> Verdict | None:
    f, c = ev.facts, ev.client
    cpu = f.client_cpu_fraction if f.client_cpu_fraction is not None else (mean(c.cpu) if c and c.cpu else None)
    hot = share(c.cpu, lambda x: x >= CPU_HOT) if c else 0.0
    lag = f.schedule_lag_p99_ms if math.isfinite(f.request_rate) else None  # rate inf: all due at t0
    found = client_limits(cpu, hot, lag)
    if not found:
        return None
    return Verdict(
        "client-bound", max(conf for conf, _ in found),
        "The client limits this run (" + "; ".join(r for _, r in found) + "): the numbers understate the server.",
        {"client_cpu_fraction": _r(cpu), "cpu_saturated_share": _r(hot), "schedule_lag_p99_ms": _r(lag)},
        "Split the load across client processes — re-run with `--workers N` (one core each, one "
        "schedule), or give the client its own cores (taskset) — and compare; if throughput rises, "
        "this run measured the client.")


def client_concurrency_cap(ev: Evidence) -> Verdict | None:
    cap, c = ev.facts.max_concurrency, ev.client
    if cap is None or c is None:
        return None
    pinned = share(c.in_flight, lambda x: x >= cap)
    if pinned < PINNED:
        return None
    evidence = {"max_concurrency": cap, "in_flight_mean": _r(mean(c.in_flight), 2), "at_cap_share": _r(pinned),
                "client_waiting_mean": _r(mean(c.waiting), 2)}
    head = (f"The client's --max-concurrency {cap} limits the load: {mean(c.in_flight):.1f} in flight on average "
            f"(at the cap {pinned:.0%} of the time, {mean(c.waiting):.1f} more waiting for a slot)")
    room = _engine_room(ev, cap, evidence)
    if room is None:
        return None
    conf, tail = room
    return Verdict("client-concurrency-cap", conf, head + tail, evidence, _raise_concurrency(cap))


def _engine_room(ev: Evidence, cap: int, evidence: dict) -> tuple[float, str] | None:
    """(confidence, sentence) when the engine could have taken more; None when it queues itself."""
    e, seqs = ev.engine, ev.facts.max_num_seqs
    if e is None:
        return 0.5, "; the engine's state is unknown (no /metrics)."
    if mean(e.waiting) >= 0.5:
        return None  # the engine queues too: its own limit binds (scheduler-cap / kv-capacity)
    kv_max = max(e.kv) if e.kv else None
    evidence.update(engine_waiting_mean=_r(mean(e.waiting), 2), engine_running_mean=_r(mean(e.running), 2),
                    kv_usage_max=_r(kv_max), max_num_seqs=seqs)
    room = f"; the engine had room: {mean(e.waiting):.1f} waiting, {mean(e.running):.1f} running"
    room += f", KV usage at most {kv_max:.0%}." if kv_max is not None else " (KV usage not reported)."
    if seqs is not None and seqs <= cap:
        return 0.6, room + f" The engine's max_num_seqs is {seqs} too: past it, requests will queue there."
    return (0.85 if kv_max is None or kv_max < KV_ROOM else 0.55), room


def _raise_concurrency(cap: int) -> str:
    return (f"Raise the client's --max-concurrency (e.g. {cap} → {2 * cap}, {4 * cap}) under the same load; "
            "engine knobs (--max-num-seqs, memory) will not move this.")


def scheduler_cap(ev: Evidence) -> Verdict | None:
    e, f = ev.engine, ev.facts
    if e is None or mean(e.waiting) < 1.0 or share(e.waiting, lambda w: w >= 1) < QUEUED:
        return None
    queued = [r for r, w in zip(e.running, e.waiting) if w >= 1]
    found = _count_cap(queued, known_cap(f, family(e)), family(e)) \
        or _token_cap(e.tokens_per_step, f.max_num_batched_tokens)
    if found is None:
        return None
    conf, what, next_step, evidence = found
    kv_mean = mean(e.kv) if e.kv else None
    conf -= 0.1 if kv_mean is not None and kv_mean >= KV_HIGH else 0.0  # memory may be next (or now)
    conf -= 0.3 if e.preemptions else 0.0  # preempting: the cache, not the count, binds
    evidence.update(_queue_numbers(e))
    kv = f"KV usage at most {max(e.kv):.0%}" if e.kv else "KV usage not reported"
    summary = (f"Requests wait at the engine while {what}: {statistics.median(e.waiting):.0f} waiting "
               f"(mean {mean(e.waiting):.1f}, max {max(e.waiting):.0f}), running mean {mean(e.running):.1f}; "
               f"{kv}, {preemptions_text(e.preemptions)}.")
    return Verdict("scheduler-cap", conf, summary, evidence, next_step)


def known_cap(facts, engine: str) -> int | None:
    """The engine's stated cap on running requests: llama.cpp's slots, vLLM's max_num_seqs."""
    return facts.slots if engine == "llamacpp" else facts.max_num_seqs


def family(e) -> str:
    """Which engine answered: the prefix of the name its running count came from."""
    return (e.names.get("running") or "vllm:").split(":", 1)[0]


# What to raise when a plateau in running is the cap, by engine family.
PLATEAU_NEXT = {
    "vllm": "If the engine runs with --max-num-seqs {p}, raise it (e.g. to {p2}); otherwise raise "
            "--max-num-batched-tokens. Re-run the same load.",
    "llamacpp": "llama.cpp runs at most --parallel requests at once (its slots): if that is {p}, raise it "
                "(e.g. to {p2}) and --ctx-size with it, since the slots share the context. Re-run the same load.",
}


# A known cap, by engine family: (what it is called, what to raise, the evidence key).
KNOWN_CAP = {
    "vllm": ("max_num_seqs {s}", "Raise --max-num-seqs from {s} (e.g. to {s2}, {s4}) and re-run the same load; "
             "watch KV usage and preemptions as it rises.", "max_num_seqs"),
    "llamacpp": ("llama.cpp's {s} slots (--parallel {s}, from its log)",
                 "Raise --parallel from {s} (e.g. to {s2}) and --ctx-size with it, since the slots share the "
                 "context. Re-run the same load.", "slots"),
}


def _count_cap(queued: list[float], seqs: int | None, engine: str = "vllm"):
    """Running pinned at the known cap (max_num_seqs, llama.cpp's slots), else at a plateau (its own maximum)."""
    if seqs is not None:
        at = share(queued, lambda r: r >= seqs)
        if at < PINNED:
            return None  # below the known cap: something else stops admission
        name, next_step, key = KNOWN_CAP.get(engine, KNOWN_CAP["vllm"])
        return (0.9, f"running sits at {name.format(s=seqs)} ({at:.0%} of queued samples)",
                next_step.format(s=seqs, s2=2 * seqs, s4=4 * seqs), {key: seqs, "at_cap_share": _r(at)})
    plateau = max(queued)
    at = share(queued, lambda r: r >= plateau)
    if plateau < 1 or at < PINNED:
        return None
    next_step = PLATEAU_NEXT.get(engine, PLATEAU_NEXT["vllm"]).format(p=f"{plateau:.0f}", p2=f"{2 * plateau:.0f}")
    return (0.7, f"running plateaus at {plateau:.0f} ({at:.0%} of queued samples; the engine's cap is not "
                 "known, so it is inferred from the plateau)", next_step,
            {"plateau": plateau, "at_cap_share": _r(at)})


def _token_cap(tokens_per_step: float | None, budget: int | None):
    """Engine steps that carry most of max_num_batched_tokens: the token budget binds."""
    if not tokens_per_step or not budget or tokens_per_step < 0.7 * budget:
        return None
    return (0.6, f"engine steps carry {tokens_per_step:.0f} tokens on average "
                 f"({tokens_per_step / budget:.0%} of max_num_batched_tokens {budget})",
            f"Raise --max-num-batched-tokens from {budget} (e.g. to {2 * budget}) and re-run the same load.",
            {"max_num_batched_tokens": budget, "tokens_per_step": _r(tokens_per_step, 1)})


def preemptions_text(n: float | None) -> str:
    return "preemptions not reported" if n is None else f"{n:.0f} preemptions"


def _queue_numbers(e) -> dict:
    return {"running_mean": _r(mean(e.running), 2), "running_max": max(e.running),
            "waiting_mean": _r(mean(e.waiting), 2), "waiting_median": statistics.median(e.waiting),
            "waiting_max": max(e.waiting), "kv_usage_mean": _r(mean(e.kv)) if e.kv else None,
            "kv_usage_max": _r(max(e.kv)) if e.kv else None, "preemptions": e.preemptions}


def kv_capacity(ev: Evidence) -> Verdict | None:
    e = ev.engine
    if e is None or (not e.kv and not e.preemptions):
        return None
    kv_mean, kv_max = (mean(e.kv), max(e.kv)) if e.kv else (None, None)
    queued = share(e.waiting, lambda w: w >= 1)
    if e.preemptions:
        conf, head = (0.9 if (kv_max or 0) >= KV_HIGH else 0.85), f"{e.preemptions:.0f} preemptions during the run"
    elif kv_mean is not None and kv_mean >= KV_HIGH and queued >= QUEUED:
        flat = max(share(e.running, lambda r, v=v: r == v) for v in set(e.running))
        # A running count that never moves while the cache is "full" looks like a count limit.
        conf, head = (0.45 if flat >= FLAT else 0.55), "no preemptions yet, but requests queue"
    elif kv_max is not None and kv_max >= 0.95:
        conf, head = 0.35, "it reached this at its peak, with no preemptions"
    else:
        return None
    usage = f"KV usage mean {kv_mean:.0%}, max {kv_max:.0%}" if e.kv else "KV usage not reported"
    return Verdict("kv-capacity", conf,
                   f"The KV cache is the limit: {head}; {usage}; {mean(e.waiting):.1f} waiting on average.",
                   _queue_numbers(e), _free_kv(ev.facts.kv_cache_tokens))


def _free_kv(kv_tokens: int | None) -> str:
    now = f" (it holds {kv_tokens:,} tokens now)" if kv_tokens else ""
    return ("Make room in the KV cache" + now + ": quantize the weights (AWQ/FP8) or the KV cache "
            "(--kv-cache-dtype fp8), raise --gpu-memory-utilization, or lower --max-model-len; re-run the same load.")


def gpu_underutilized(ev: Evidence) -> Verdict | None:
    gpus = [g for g in ev.gpus if g.util]
    if not gpus:
        return None
    util = mean([mean(g.util) for g in gpus])
    if util >= GPU_UTIL_LOW:
        return None
    running = f" with {mean(ev.engine.running):.1f} requests running" if ev.engine else ""
    return Verdict("gpu-underutilized", 0.7 if util < GPU_UTIL_LOW / 2 else 0.55,
                   f"The GPU idles under load: utilization {util:.0f}% on average while requests were in "
                   f"flight{running}.",
                   {"gpu_util_mean": _r(util, 1), "gpus": [g.index for g in gpus]},
                   "Batch more: raise the offered load (--max-concurrency, --request-rate) and the engine's "
                   "--max-num-seqs; a model this small for the GPU may serve better as several replicas.")


# Peak memory bandwidth (TB/s) by NVML device name, most specific first: datasheet figures.
# First match wins: a name that contains another's ("GH200" ⊃ "H200" ⊃ "H20") comes before it.
PEAK_TBS = (("GH200", 4.0), ("H200", 4.8), ("H100 NVL", 3.9), ("H100 PCIe", 2.0), ("H100", 3.35), ("H20", 4.0),
            ("B200", 8.0), ("A100-SXM4-80GB", 2.039), ("A100 80GB PCIe", 1.935),
            ("A100", 1.555), ("L40S", 0.864), ("L40", 0.864), ("A10G", 0.6), ("A10", 0.6), ("L4", 0.3),
            ("RTX 4090", 1.008), ("T4", 0.32))
BANDWIDTH_SHARE = 0.4  # weights re-read at ≥ 40 % of peak: decode is bound by memory


def peak_tbs(name: str | None) -> float | None:
    return next((tbs for key, tbs in PEAK_TBS if name and key in name), None)


def weight_read_share(ev: Evidence, g) -> float | None:
    """Weights read per second ÷ the GPU's peak bandwidth. Each decode step reads every
    weight once: steps/s = output tok/s ÷ mean running requests; bytes/s ≥ steps/s ×
    weight bytes (a lower bound: KV reads come on top). None where a part is unknown."""
    peak, f = peak_tbs(g.name), ev.facts
    running = mean(ev.engine.running) if ev.engine and ev.engine.running else None
    if not (peak and f.weights_gib and f.output_throughput and running and running >= 1):
        return None
    per_gpu = f.weights_gib / (f.tensor_parallel or 1)  # tensor parallel: each GPU holds its shard
    return f.output_throughput / running * per_gpu * 2**30 / (peak * 1e12)


def memory_bandwidth_bound(ev: Evidence) -> Verdict | None:
    hot = [g for g in ev.gpus if g.util and g.power_w and _hot(g)]
    if not hot:
        return None
    g = hot[0]
    power, tok_s = mean(g.power_w), ev.facts.output_throughput
    share = weight_read_share(ev, g)
    if share is not None and share < BANDWIDTH_SHARE:
        return None  # hot, but its throughput reads memory well below peak: not the bandwidth
    per_w = f", {tok_s / power:.2f} output tok/s per W" if tok_s else ""
    reads = (f" Reading the weights once per decode step takes at least {share:.0%} of its "
             f"{peak_tbs(g.name):g} TB/s." if share is not None else
             " NVML sees neither bytes/s nor FLOPs, and the weights' size or this GPU's peak bandwidth is not "
             "known here: this is inferred from power and memory activity alone.")
    return Verdict(
        "memory-bandwidth-bound", 0.75 if share is not None else 0.5,
        f"GPU {g.index} is busy and hot: utilization {mean(g.util):.0f}%, memory controller busy "
        f"{mean(g.mem_util):.0f}%, power {power:.0f} W of {g.power_limit_w:.0f} W{per_w}.{reads}",
        {"gpu": g.index, "util_mean": _r(mean(g.util), 1), "mem_util_mean": _r(mean(g.mem_util), 1),
         "power_w_mean": _r(power, 1), "power_limit_w": g.power_limit_w, "output_tok_s": _r(tok_s, 1),
         "weight_read_share": _r(share, 3) if share is not None else None},
        "Cut the bytes read per token: quantize the weights (AWQ/FP8) or the KV cache (fp8); a larger batch "
        "spreads each weight read over more tokens, if latency allows.")


def _hot(g) -> bool:
    return (mean(g.util) >= GPU_UTIL_HIGH and g.power_limit_w is not None
            and mean(g.power_w) >= GPU_POWER_HIGH * g.power_limit_w and mean(g.mem_util) >= GPU_MEM_BUSY)


RULES = (client_bound, kv_capacity, scheduler_cap, client_concurrency_cap, memory_bandwidth_bound,
         gpu_underutilized)
