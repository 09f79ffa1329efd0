"""The checks every spec passes, however it was built (flags, a study file, code): layer 0's
values (``servelab.config``), each problem one InputError line naming the flag.

Run once, by whoever builds the spec from input (flags/bench_serve.bench_spec). Whether a
backend or dataset *name* is supported is the flags' check (the reasons live above this layer).
"""

from __future__ import annotations

import math

from servelab.config import AGENTIC_DATASETS, AGENTX_MIN_DURATION_S, BenchSpec, LoadSpec, MultiTurnSpec
from servelab.errors import InputError

LORA_ASSIGNMENTS = ("random", "round-robin", "uniform", "identical", "distinct")


def lora_rule(text: str) -> tuple[str, float | None]:
    """``--lora-assignment``'s (rule, Zipf exponent): one of LORA_ASSIGNMENTS, or ``zipf:ALPHA``
    with a finite ALPHA >= 0 (0 draws uniformly, as ``random``)."""
    if text in LORA_ASSIGNMENTS:
        return text, None
    name, _, alpha = text.partition(":")
    try:
        exponent = float(alpha) if name == "zipf" else math.nan
    except ValueError:
        exponent = math.nan
    if not 0.0 <= exponent < math.inf:
        raise InputError(f"--lora-assignment {text!r}: expected {', '.join(LORA_ASSIGNMENTS)} or zipf:ALPHA "
                         "(ALPHA a number >= 0, e.g. zipf:1.1)")
    return "zipf", exponent


def check_lora(spec: BenchSpec) -> None:
    """--lora-assignment's rule, and one adapter a request for ``distinct`` (the dataset's final size)."""
    request = spec.request
    rule, _ = lora_rule(request.lora_assignment)
    n, k = spec.dataset.num_prompts, len(request.lora_modules)
    if rule == "distinct" and k and n > k:
        raise InputError(f"--lora-assignment distinct gives each request its own adapter: --num-prompts {n} "
                         f"needs at least {n} names in --lora-modules (given {k})")


# custom (and spec_bench, speed_bench, built on it) read "--num-prompts ≤ 0" as "every line", as vLLM does.
EVERY_LINE_DATASETS = ("custom", "spec_bench", "speed_bench")


def check_num_prompts(dataset_name: str, num_prompts: int) -> None:
    """At parse time (before any server is asked) and again where a dataset is sampled."""
    if num_prompts < 1 and dataset_name not in EVERY_LINE_DATASETS:
        raise InputError(f"--num-prompts must be >= 1, got {num_prompts}")


def check_spec(spec: BenchSpec) -> None:
    """The first problem with ``spec``'s values or their combination, as one InputError line."""
    load = spec.load
    if load.max_concurrency is not None and load.max_concurrency <= 0:
        raise InputError("--max-concurrency must be greater than 0")
    _check_workers(spec)
    if not load.request_rate > 0 or math.isnan(load.request_rate):
        raise InputError("--request-rate must be positive (or inf)")
    if not load.burstiness > 0:
        raise InputError("--burstiness must be positive")
    if spec.dataset.name in ("random", "prefix_repetition") and spec.dataset.path:
        raise InputError(f"--dataset-path cannot be used with --dataset-name {spec.dataset.name}")
    if load.num_warmups < 0:
        raise InputError("--num-warmups must be >= 0")
    if not spec.output.telemetry_interval_s > 0:
        raise InputError("--telemetry-interval must be positive")
    if spec.output.gpu_hour_cost is not None and not 0 < spec.output.gpu_hour_cost < math.inf:
        raise InputError("--gpu-hour-cost must be a positive number of dollars")
    check_multi_turn(spec)
    check_agentic(spec)
    _check_ramp_up(load)
    _check_self_timed(spec)
    if not load.probe_request_rate >= 0:
        raise InputError("--probe-request-rate must be >= 0")
    if spec.request.logprobs is not None and spec.request.logprobs < 0:
        raise InputError("--logprobs must be >= 0")
    _check_stop_rules(spec)


def _check_stop_rules(spec: BenchSpec) -> None:
    """The stop rules watch one process's live counters: the single-process run."""
    load = spec.load
    if load.saturation == "off" and load.stop_on_errors is None and load.stop_on_error_rate is None:
        return
    if spec.driver != "local":
        raise InputError("--stop-when-saturated, --stop-on-errors and --stop-on-error-rate need a single-process "
                         "run (not with --workers, --ray, --multi-turn or --simulate)")
    if load.stop_on_errors is not None and load.stop_on_errors < 1:
        raise InputError("--stop-on-errors must be >= 1")


def check_saturation_rule(spec: BenchSpec) -> None:
    """--stop-when-saturated judges requests outstanding at the client rising (loadgen/watch.py):
    under --request-rate inf every request is released at t0, so outstanding only falls (a
    closed loop holds the server's share at the cap) and the rule could never fire. Checked
    on the load a run is given (a sweep's base spec leaves out the load it varies)."""
    load = spec.load
    if load.saturation == "off" or load.ramp_up_strategy is not None or not math.isinf(load.request_rate):
        return
    loop = "a closed loop under --max-concurrency" if load.max_concurrency else "a burst"
    raise InputError(f"--stop-when-saturated needs arrivals paced in time (a finite --request-rate, or "
                     f"--ramp-up-strategy): --request-rate inf releases every request at t0, {loop}, so requests "
                     f"outstanding never rise and the rule could never fire")


def check_agentic(spec: BenchSpec) -> None:
    """The agentic dataset flags (again once bench has filled the dataset's spec in)."""
    _check_agentic(spec)
    _check_locked(spec)


def _check_agentic(spec: BenchSpec) -> None:
    """Agentic sessions (datasets/sessions.py, loadgen/sessions.py): their flags' values."""
    name, scale = spec.dataset.name, spec.dataset.trace_scale
    if name not in AGENTIC_DATASETS:
        if spec.request.tool_choice is not None:
            raise InputError(f"--session-tools is for --dataset-name {' or '.join(AGENTIC_DATASETS)}, not {name}")
        if scale != 1:
            raise InputError(f"--trace-scale is for --dataset-name {' or '.join(AGENTIC_DATASETS)}, not {name}")
        if spec.dataset.agentic_shape:
            raise InputError(f"--agentic-shape is for --dataset-name agentic, not {name}")
        if spec.dataset.trace_max_wait_s is not None:
            raise InputError(f"--trace-max-wait is for --dataset-name {' or '.join(AGENTIC_DATASETS)}, not {name}")
        if spec.load.max_sessions is not None:
            raise InputError(f"--max-sessions is for --dataset-name {' or '.join(AGENTIC_DATASETS)}, not {name} "
                             "(--max-concurrency caps requests)")
        return
    _check_lanes(spec)
    if not scale > 0:
        raise InputError(f"--trace-scale must be > 0, not {scale}")
    if spec.dataset.trace_max_wait_s is not None and not spec.dataset.trace_max_wait_s >= 0:
        raise InputError(f"--trace-max-wait must be >= 0 seconds, not {spec.dataset.trace_max_wait_s}")
    if spec.request.tool_choice is not None and spec.server.backend != "openai-chat":
        raise InputError("--session-tools sends tool calls, which need chat requests: add --backend openai-chat")
    if spec.multi_turn.enabled:
        raise InputError(f"--dataset-name {name} replays its own sessions: not with --multi-turn")
    if spec.server.backend == "openai-chat" and spec.simulate is not None:
        raise InputError("--simulate replays sessions as token ids: not with --backend openai-chat (chat sessions)")


def _check_lanes(spec: BenchSpec) -> None:
    """--max-sessions: a whole number of lanes, held by one client process (a lane cannot span shards)."""
    lanes, load = spec.load.max_sessions, spec.load
    if lanes is None:
        return
    if lanes < 1:
        raise InputError(f"--max-sessions must be >= 1, not {lanes}")
    split = "--workers" if load.workers > 1 else "--ray" if load.ray else None
    if split:
        raise InputError(f"--max-sessions with {split}: a lane is held in one client process; run the sessions "
                         f"in one (drop {split})")


AGENTX_IDLE_CAP_S = 10.0  # datasets/agentx.IDLE_CAP_S: the one value --trace-max-wait may repeat


def _check_locked(spec: BenchSpec) -> None:
    """--agentic-locked fixes how the sessions are replayed: every flag that would change it is
    named in one line (AgentX's locked scenario refuses them too)."""
    data, load = spec.dataset, spec.load
    if not data.agentic_locked:
        if data.agentic_min_duration_s != AGENTX_MIN_DURATION_S:
            raise InputError("--agentic-min-duration is for --agentic-locked")
        return
    conflicts = [f"--dataset-name {data.name} (a recorded trace: weka or otel)"] * (data.name not in ("weka", "otel"))
    conflicts += ["--request-rate (every session starts at once)"] * (not math.isinf(load.request_rate))
    conflicts += ["--ramp-up-strategy"] * (load.ramp_up_strategy is not None)
    conflicts += [f"--trace-scale {data.trace_scale} (every recorded token is sent)"] * (data.trace_scale != 1)
    conflicts += [f"--trace-max-wait {data.trace_max_wait_s} (idle gaps are capped at {AGENTX_IDLE_CAP_S:g} s)"] * (
        data.trace_max_wait_s not in (None, AGENTX_IDLE_CAP_S))
    conflicts += ["no --ignore-eos (each call produces its recorded output length)"] * (not spec.request.ignore_eos)
    conflicts += ["--workers, --ray or --simulate (one client replays the locked scenario)"] * (
        spec.load.workers > 1 or spec.load.ray is not None or spec.simulate is not None)
    conflicts += ["--backend openai-chat (the locked replay sends token ids)"] * (spec.server.backend == "openai-chat")
    if not data.agentic_min_duration_s > 0:
        conflicts.append(f"--agentic-min-duration {data.agentic_min_duration_s} (must be > 0 s)")
    if conflicts:
        raise InputError(f"--agentic-locked replays the trace one fixed way; it conflicts with: {'; '.join(conflicts)}")


def check_multi_turn(spec: BenchSpec) -> None:
    """What a --multi-turn run needs."""
    multi = spec.multi_turn
    if not multi.enabled:
        if multi != MultiTurnSpec():
            raise InputError("--multi-turn-think-time, --multi-turn-max-turns and --multi-turn-no-history "
                             "need --multi-turn")
        return
    if spec.server.backend != "openai-chat":
        raise InputError("--multi-turn needs --backend openai-chat (the history is sent as chat messages)")
    if spec.dataset.name not in ("sharegpt", "custom"):
        raise InputError(f"--multi-turn needs --dataset-name sharegpt or custom, not {spec.dataset.name}")
    if spec.load.workers > 1 or spec.load.ray is not None or spec.simulate is not None:
        raise InputError("--multi-turn cannot be used with --workers, --ray or --simulate (not built yet)")
    if spec.request.lora_modules or spec.load.ramp_up_strategy is not None or spec.load.probe_request_rate:
        raise InputError("--multi-turn cannot be used with --lora-modules, --ramp-up-strategy or "
                         "--probe-request-rate (not built yet)")
    if not multi.think_time_s >= 0:
        raise InputError("--multi-turn-think-time must be >= 0")
    if multi.max_turns is not None and multi.max_turns < 1:
        raise InputError("--multi-turn-max-turns must be >= 1")


def _check_ramp_up(load: LoadSpec) -> None:
    """vLLM's rules for a ramp: no --request-rate beside it, both ends given, start <= end."""
    if load.ramp_up_strategy is None:
        return
    if not math.isinf(load.request_rate):
        raise InputError("--ramp-up-strategy sets the rate itself: do not give --request-rate")
    start, end = load.ramp_up_start_rps, load.ramp_up_end_rps
    if start is None or end is None:
        raise InputError("--ramp-up-strategy needs both --ramp-up-start-rps and --ramp-up-end-rps")
    if start > end:
        raise InputError("--ramp-up-start-rps must not exceed --ramp-up-end-rps")
    if start <= 0:  # vLLM stops on its first request (rate 0) or refuses exponential
        raise InputError("--ramp-up-start-rps must be > 0 (the first request's rate)")


def _check_self_timed(spec: BenchSpec) -> None:
    if spec.load.self_timed is not None and spec.dataset.name != "timed_trace":
        raise InputError("--self-timed/--no-self-timed is only for --dataset-name timed_trace")


def _check_workers(spec: BenchSpec) -> None:
    load = spec.load
    if load.workers < 1:
        raise InputError("--workers must be at least 1")
    if load.max_concurrency is not None and load.workers > load.max_concurrency:
        raise InputError(f"--workers {load.workers} is more than --max-concurrency {load.max_concurrency}: "
                         f"each worker needs at least one of the run's concurrency slots")
    if load.ray is not None and (load.workers > 1 or spec.simulate is not None):
        raise InputError("--ray cannot be used with --workers or --simulate (Ray places one shard per node)")
    if load.workers > 1 and spec.simulate is not None:
        raise InputError("--workers cannot be used with --simulate (the simulator has no client to split)")
    split = load.workers > 1 or load.ray is not None or spec.simulate is not None
    for flag, on in (("--probe-request-rate", load.probe_request_rate > 0), ("--profile", spec.server.profile)):
        if on and split:
            raise InputError(f"{flag} runs in one client process: not with --workers, --ray or --simulate")
