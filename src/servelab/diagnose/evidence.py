"""What the rules look at: facts from the result, and views of the timeline.

Pure: ``facts_from_result(result)`` and ``evidence(facts, timeline)`` take
values and return values. A view is None when its source is absent, and
``Evidence.missing`` says why, so a verdict can say what it could not check.

"Loaded" samples are the ones with work in the system (engine: running +
waiting ≥ 1; client: in flight + waiting ≥ 1): ramp-up and drain are kept, idle
moments before and after are not. The rules mark states in those; a mean a verdict
prints is a time average over the whole run window (``*_avg``: every sample from t0 to
the end, idle ones too — the sampler ticks evenly, so a sample mean is a time mean): at
50 req/s of short requests the loaded samples say "1 in flight", the run held 0.03. Each view keeps its samples' times (``t_s``),
so a rule can say when a state held and for how long (``spans.spell``), and the
engine's counters become per-sample rates (tokens per step, preemptions) for the
same reason: a run-wide mean hides a limit that bound for a third of a long tail.
"""

from __future__ import annotations

import bisect
import math
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from itertools import pairwise

from servelab.engines.spec import flag_value as engine_flag
from servelab.telemetry.machine import WARN_OTHERS
from servelab.telemetry.summary import busy_at, engine_gpus, increase, ratio, values
from servelab.telemetry.timeline import Timeline


@dataclass(frozen=True, slots=True)
class SessionCache:
    """What an agentic run's result says of its prefix cache (diagnose/prefix_cache.py)."""

    measured: float
    ideal: float
    block_size: int
    input_tokens: int
    footprint_tokens: int  # tokens the trace puts in the cache: prompt tokens it does not reuse, and outputs


def session_cache(agentic: dict | None) -> SessionCache | None:
    """From the result's ``servelab.agentic``; None without a measured rate beside the ideal."""
    agentic = agentic or {}
    measured, ideal = agentic.get("measured_prefix_cache_hit_rate"), agentic.get("ideal_prefix_cache_hit_rate")
    if measured is None or ideal is None:
        return None
    inputs, outputs = int(agentic.get("input_tokens") or 0), int(agentic.get("output_tokens") or 0)
    return SessionCache(float(measured), float(ideal), int(agentic.get("ideal_at_block_size") or 16), inputs,
                        round((1 - float(ideal)) * inputs) + outputs)


@dataclass(frozen=True, slots=True)
class RunFacts:
    """What the result says about the run; None = it does not say."""

    max_concurrency: int | None = None
    request_rate: float = math.inf
    duration_s: float | None = None
    completed: int | None = None
    output_throughput: float | None = None
    client_cpu_fraction: float | None = None
    schedule_lag_p99_ms: float | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    kv_cache_tokens: int | None = None
    weights_gib: float | None = None  # the engine's memory report (or the checkpoint's size)
    tensor_parallel: int | None = None  # the engine's --tensor-parallel-size
    slots: int | None = None  # llama.cpp's request slots, from its memory report: a known cap
    host: Host | None = None  # the machine's CPUs during the run (result["servelab"]["machine"])
    peak_concurrency: int | None = None  # exact: the sweep over the records' [sent, done) intervals
    simulated: str | None = None  # what produced the numbers when no engine ran (result["servelab"]["simulated"])
    session_cache: SessionCache | None = None  # an agentic run's measured prefix-cache hit rate beside its ideal


@dataclass(frozen=True, slots=True)
class Host:
    """The machine's CPUs during the run, and what ran on them."""

    cpus: int
    busy: float  # all CPUs' busy time ÷ capacity (wall time × CPUs)
    others: float  # the part of ``busy`` that was not servelab's or the engine's
    cpu_engine: bool  # the engine listened on this machine and computes on its CPUs
    threads: int | None = None  # each replica's compute threads, where they were set
    replicas: int = 1  # engine replicas running at once on this machine

    @property
    def saturated(self) -> bool:
        # ≥ 90 % of all CPUs' time busy: no core sat idle for long, so a thread that wakes waits for one
        return self.busy >= 0.90

    @property
    def starved_by_others(self) -> bool:
        return self.others >= WARN_OTHERS  # the bench's own neighbour warning (telemetry/machine.py)

    @property
    def oversubscribed(self) -> bool:
        return self.threads is not None and self.replicas * self.threads > self.cpus


@dataclass(frozen=True, slots=True)
class EngineView:
    """Loaded engine samples during the run, aligned: running[i], waiting[i], kv[i]."""

    running: tuple[float, ...]
    waiting: tuple[float, ...]
    kv: tuple[float, ...] | None  # None: the engine reports no KV usage (llama.cpp)
    t_s: tuple[float, ...] = ()  # each sample's time, seconds from t0
    step_tokens: tuple[float | None, ...] = ()  # mean tokens per engine step since the sample before
    preempted: tuple[float, ...] = ()  # preemptions since the sample before (0 when not reported)
    preemptions: float | None = None
    tokens_per_step: float | None = None
    generation_tok_s: float | None = None
    names: dict = field(default_factory=dict)
    running_avg: float = 0.0  # time averages over the run window (see the module's docstring)
    waiting_avg: float = 0.0
    kv_avg: float | None = None


@dataclass(frozen=True, slots=True)
class ClientView:
    in_flight: tuple[int, ...]
    waiting: tuple[int, ...]  # dispatched, waiting for a concurrency slot
    cpu: tuple[float, ...]
    lag_ms_max: float | None = None
    t_s: tuple[float, ...] = ()
    in_flight_avg: float = 0.0  # time averages over the run window
    waiting_avg: float = 0.0


@dataclass(frozen=True, slots=True)
class GpuView:
    """One GPU's samples while the client had requests in flight."""

    index: int
    name: str | None
    util: tuple[float, ...]
    mem_util: tuple[float, ...]
    power_w: tuple[float, ...]
    power_limit_w: float | None


@dataclass(frozen=True, slots=True)
class Evidence:
    facts: RunFacts
    engine: EngineView | None = None
    client: ClientView | None = None
    gpus: tuple[GpuView, ...] = ()
    missing: dict[str, str] = field(default_factory=dict)  # source -> why it is absent
    tick_s: float = 0.25  # the sampler's interval: a sample stands for this much of the run


def facts_from_result(result: dict, max_num_seqs: int | None = None,
                      max_num_batched_tokens: int | None = None) -> RunFacts:
    """Read a result JSON (as a dict). Explicit engine limits win over the result's."""
    ours = result.get("servelab") or {}
    engine = ours.get("engine") or {}
    args = [str(a) for a in engine.get("args") or []]
    stated = engine.get("stated_args") or {}  # what vLLM's log says it was given, however it was given
    memory = engine.get("memory_report") or {}
    rate = result.get("request_rate", "inf")
    return RunFacts(
        max_concurrency=result.get("max_concurrency"),
        request_rate=math.inf if rate in ("inf", None) else float(rate),
        duration_s=result.get("duration"), completed=result.get("completed"),
        output_throughput=result.get("output_throughput"),
        client_cpu_fraction=ours.get("client_cpu_fraction"),
        schedule_lag_p99_ms=(ours.get("schedule_lag_ms") or {}).get("p99"),
        max_num_seqs=max_num_seqs or flag_value(args, "--max-num-seqs") or _whole(stated.get("max_num_seqs")),
        max_num_batched_tokens=(max_num_batched_tokens or flag_value(args, "--max-num-batched-tokens")
                                or _whole(stated.get("max_num_batched_tokens"))),
        kv_cache_tokens=memory.get("kv_cache_tokens"), slots=memory.get("slots"),
        tensor_parallel=(flag_value(args, "--tensor-parallel-size") or flag_value(args, "-tp")
                         or _whole(stated.get("tensor_parallel_size"))),
        weights_gib=memory.get("weights_gib") or (engine.get("model_files") or {}).get("weights_gib"),
        host=host_from_result(ours), peak_concurrency=_whole(result.get("max_concurrent_requests")),
        simulated=simulated_label(ours.get("simulated")), session_cache=session_cache(ours.get("agentic")))


def _whole(x) -> int | None:
    return None if x is None else int(x)


def simulated_label(section: dict | None) -> str | None:
    """What produced a simulated run's numbers, in a few words; None for a measured run."""
    if not section:
        return None
    return f"no engine ran: {section.get('engine') or 'a simulated engine'}, {section.get('mode', 'unknown')} mode"


def host_from_result(ours: dict) -> Host | None:
    """The result's machine share (None when it has none), and whether the engine computes on it."""
    machine, engine = ours.get("machine") or {}, ours.get("engine") or {}
    if machine.get("busy_fraction") is None:
        return None
    scale = ours.get("scale") or {}
    # scale's "alone" phase runs replica 0 by itself (study/scale.py ALONE); "together" runs them all
    replicas = 1 if scale.get("phase", "alone") == "alone" else int(scale.get("replicas") or 1)
    return Host(int(machine.get("cpus") or 1), float(machine["busy_fraction"]),
                float(machine.get("others_fraction") or 0.0),
                bool(machine.get("local_engine_pids")) and cpu_engine(engine), compute_threads(engine), replicas)


def cpu_engine(engine: dict) -> bool:
    """Does the engine compute on CPUs? llama.cpp without GPU layers; vLLM's CPU build, which
    servelab binds to cores (VLLM_CPU_OMP_THREADS_BIND) and whose dtype it chooses (the
    memory report's dtype is set only there: engines/engine.py); the embedded engine."""
    args = [str(a) for a in engine.get("args") or []]
    if engine.get("kind") == "llamacpp":
        return not (flag_value(args, "--n-gpu-layers") or flag_value(args, "-ngl"))
    return (engine.get("kind") == "embedded" or "VLLM_CPU_OMP_THREADS_BIND" in (engine.get("env") or {})
            or bool((engine.get("memory_report") or {}).get("dtype")))


def compute_threads(engine: dict) -> int | None:
    """Cores a replica was given: vLLM's CPU bind ("0,1|2-3": 4) or llama.cpp's --threads."""
    args = [str(a) for a in engine.get("args") or []]
    threads = flag_value(args, "--threads") or flag_value(args, "-t")
    bind = (engine.get("env") or {}).get("VLLM_CPU_OMP_THREADS_BIND")
    if threads or not bind:
        return threads
    ranges = [tuple(map(int, r.split("-"))) for r in re.findall(r"\d+(?:-\d+)?", bind)]
    return sum(r[-1] - r[0] + 1 for r in ranges) or None


def flag_value(args: list[str], flag: str) -> int | None:
    """The engine's ``flag`` as a whole number (the last one given); None if absent or not one."""
    found = engine_flag(args, flag)
    try:
        return int(found) if found is not None else None
    except ValueError:
        return None


def evidence(facts: RunFacts, timeline: Timeline | None) -> Evidence:
    if timeline is None:
        return Evidence(facts, missing={"telemetry": "no timeline (telemetry was off, or its file is gone)"})
    tick_s = float(timeline.header.get("interval_s") or 0.25)
    missing = {src: (timeline.header.get(src) or {}).get("detail") or "no samples"
               for src in ("engine", "gpu") if timeline.status(src) != "ok"}
    client = client_view(timeline)
    engine = engine_view(timeline) if "engine" not in missing else None
    if engine is None and "engine" not in missing:
        missing["engine"] = no_engine_view(timeline)
    sparse = sparse_engine(timeline, client) if engine is not None else None
    if sparse is not None:  # a sliver of the run is not its state: judge from the client's view alone
        engine, missing["engine"] = None, sparse
    gpus: tuple[GpuView, ...] = ()
    if "gpu" not in missing:
        used, why = engine_gpus(timeline)
        gpus = gpu_views(timeline, used)
        if not gpus:
            missing["gpu"] = why or "no GPU samples while requests were in flight"
    return Evidence(facts, engine, client, gpus, missing, tick_s)


def no_engine_view(timeline: Timeline) -> str:
    """Why the engine's samples show nothing to judge, in figures: none answered inside the
    run (each failed, or the scraper took none: its longest gap says how starved it was), or
    every answer showed an idle engine (nothing running or waiting)."""
    end = timeline.duration_ms
    inside = [s for s in timeline.samples if s["src"] == "engine" and 0.0 <= s["t_ms"] <= end]
    good = [s for s in inside if "error" not in s]
    failed = Counter(s["error"] for s in inside if "error" in s)
    if good:
        why = f"; {sum(failed.values())} scrapes failed: {failed.most_common(1)[0][0]}" if failed else ""
        return (f"no engine samples during the run with work: {len(good)} in the run showed nothing running or "
                f"waiting{why}")
    if failed:
        error, _ = failed.most_common(1)[0]
        return f"no engine samples during the run: all {sum(failed.values())} scrapes in it failed ({error})"
    times = [s["t_ms"] for s in timeline.samples if s["src"] == "engine"]
    gap = max((b - a for a, b in pairwise(times)), default=None)
    longest = f"; longest gap between samples {gap / 1000:.1f} s" if gap is not None else ""
    return f"no engine samples during the run: the scraper took none in its {end / 1000:.1f} s{longest}"


# An engine answer stands for the state within this many seconds of it; answers that stand for
# less than half the time requests were in flight are not the run's state. On a 2-core machine at
# full load, vLLM's API server went silent for whole runs but their last second (CI, Dec 2026): the
# drain's "1 running, 0 waiting" hid a queue of 30, and the client's cap was blamed.
ANSWER_STANDS_S = 1.0
COVERED = 0.5


def sparse_engine(timeline: Timeline, client: ClientView | None) -> str | None:
    """Why the engine's answers do not stand for the run, in figures; None when they cover at least
    COVERED of the client's loaded ticks (each within ANSWER_STANDS_S of an answer). Slow but
    regular answers (one a second under contention) still cover the run; a long silence does not."""
    if client is None or not client.t_s:
        return None
    end = timeline.duration_ms
    inside = [s for s in timeline.samples if s["src"] == "engine" and 0.0 <= s["t_ms"] <= end]
    answers = [s["t_ms"] / 1000.0 for s in inside if "error" not in s]
    covered = sum(1 for t in client.t_s if _nearest(answers, t) <= ANSWER_STANDS_S) / len(client.t_s)
    if covered >= COVERED:
        return None
    tick = float(timeline.header.get("interval_s") or 0.25)
    first, last = client.t_s[0], client.t_s[-1] + tick
    edges = [first, *(t for t in answers if first <= t <= last), last]
    gap = max(b - a for a, b in pairwise(edges))
    failed = Counter(s["error"] for s in inside if "error" in s)
    why = f", {sum(failed.values())} scrapes failed: {failed.most_common(1)[0][0]}" if failed else ""
    return (f"its samples cover {covered:.0%} of the {len(client.t_s) * tick:.1f} s with requests in flight "
            f"({len(answers)} answered{why}; longest gap between answers {gap:.1f} s)")


def _nearest(times: list[float], t: float) -> float:
    """Distance from ``t`` to the nearest of the sorted ``times`` (inf when there are none)."""
    i = bisect.bisect_left(times, t)
    return min((abs(times[j] - t) for j in (i - 1, i) if 0 <= j < len(times)), default=math.inf)


def engine_view(timeline: Timeline) -> EngineView | None:
    end = timeline.duration_ms
    samples = timeline.of("engine")
    rows = [(s, tokens, preempted) for s, (tokens, preempted) in zip(samples, _steps(samples))
            if 0.0 <= s["t_ms"] <= end and (s.get("running") or 0) + (s.get("waiting") or 0) >= 1]
    if not rows:
        return None
    loaded = [s for s, _, _ in rows]
    window = timeline.during("engine")
    kv, kv_all = values(loaded, "kv_usage"), values(window, "kv_usage")
    duration_s = timeline.duration_ms / 1000.0
    return EngineView(
        running=tuple(s.get("running") or 0.0 for s in loaded),
        waiting=tuple(s.get("waiting") or 0.0 for s in loaded),
        kv=tuple(kv) if len(kv) == len(loaded) else None,
        t_s=tuple(s["t_ms"] / 1000.0 for s in loaded),
        step_tokens=tuple(tokens for _, tokens, _ in rows), preempted=tuple(p for _, _, p in rows),
        preemptions=increase(timeline, "preemptions"),
        tokens_per_step=ratio(increase(timeline, "iteration_tokens_sum"),
                              increase(timeline, "iteration_tokens_count")),
        generation_tok_s=ratio(increase(timeline, "generation_tokens"), duration_s),
        names=(timeline.header.get("engine") or {}).get("names", {}),
        running_avg=_avg(window, "running"), waiting_avg=_avg(window, "waiting"),
        kv_avg=statistics.fmean(kv_all) if kv_all else None)


def _avg(samples: list[dict], field: str) -> float:
    """A gauge's time average over the run window: every sample from t0 to the end (a missing
    gauge reads 0, as the loaded view reads it)."""
    return statistics.fmean(s.get(field) or 0.0 for s in samples) if samples else 0.0


def _steps(samples: list[dict]) -> list[tuple[float | None, float]]:
    """Per sample, (mean tokens per engine step, preemptions) since the sample before. Where no
    step ended in between (a step longer than the tick: a full prefill chunk on a large model
    takes ~0.4 s), the sample caught the engine mid-step, not idle: the step still running is
    taken to carry what the last one did, so a run of 2,048-token steps reads full at every tick."""
    out, last = [], None
    for prev, s in pairwise([None, *samples]):
        tokens, preempted, ended = _since(prev, s)
        last = tokens if ended else last if ended == 0 else None
        out.append((last, preempted))
    return out


def _since(prev: dict | None, s: dict) -> tuple[float | None, float, float | None]:
    """(mean tokens per engine step, preemptions, steps ended) between the sample before and this
    one: Δ iteration-token histogram sum ÷ Δ its count; None when no step ended or it is not reported."""
    def rise(field: str) -> float | None:
        a, b = (prev or {}).get(field), s.get(field)
        return max(0.0, b - a) if a is not None and b is not None else None

    steps = rise("iteration_tokens_count")
    return ratio(rise("iteration_tokens_sum"), steps), rise("preemptions") or 0.0, steps


def client_view(timeline: Timeline) -> ClientView | None:
    window = timeline.during("client")
    loaded = [s for s in window if s["in_flight"] + s["waiting"] >= 1]
    if not loaded:
        return None
    return ClientView(in_flight=tuple(s["in_flight"] for s in loaded),
                      waiting=tuple(s["waiting"] for s in loaded),
                      cpu=tuple(values(timeline.during("client"), "cpu")),
                      lag_ms_max=max(values(loaded, "lag_ms"), default=None),
                      t_s=tuple(s["t_ms"] / 1000.0 for s in loaded),
                      in_flight_avg=_avg(window, "in_flight"), waiting_avg=_avg(window, "waiting"))


def gpu_views(timeline: Timeline, used: list[int]) -> tuple[GpuView, ...]:
    """The GPUs ``used`` (indices: the engine's, ``telemetry.summary.engine_gpus``); none when the
    engine is not on any GPU NVML sees. Samples only while requests were in flight."""
    devices = (timeline.header.get("gpu") or {}).get("devices", [])
    busy = busy_at(timeline)
    rows = [r for r in timeline.during("gpu") if busy(r["t_ms"])]
    return tuple(_gpu_view(d, [r["devices"][d["index"]] for r in rows]) for d in devices if d["index"] in used)


def _gpu_view(d: dict, rows: list[dict]) -> GpuView:
    return GpuView(d["index"], d.get("name"), tuple(values(rows, "util")), tuple(values(rows, "mem_util")),
                   tuple(values(rows, "power_w")), d.get("power_limit_w"))
