"""User-facing specs (layer 0): plain frozen values built from flags or files.

Defaults follow ``vllm bench serve`` so the same flags mean the same traffic.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any


# Every --dataset-name vLLM 0.32 offers, in its order: the one list of choices. Which of them
# servelab samples is ``datasets.SAMPLERS``; the others stop with a one-line reason.
DATASET_NAMES = ("sharegpt", "burstgpt", "random", "random-mm", "random-rerank", "hf", "custom", "custom_audio",
                 "custom_image", "prefix_repetition", "spec_bench", "speed_bench", "timed_trace")
# servelab's own: agentic sessions replayed as DAGs of calls (datasets/sessions.py), by the
# "sessions" driver — weka: a WEKA trace; otel: an OpenTelemetry GenAI span export; agentic:
# synthetic sessions
AGENTIC_DATASETS = ("weka", "otel", "agentic")
# The one list of engine kinds (``engines.kinds.ENGINES`` implements each; every --engine offers
# these). embedded: the offline default — vLLM's CPU build serving SmolLM2-135M-Instruct.
AGENTX_MIN_DURATION_S = 900.0  # AgentX's floor on a run's duration: DatasetSpec.agentic_min_duration_s's default
ENGINE_KINDS = ("embedded", "vllm", "llamacpp", "external", "command", "sim")  # sim: servelab's simulated vLLM


@dataclass(frozen=True, slots=True)
class DatasetSpec:
    """Which requests to make. One field per ``--<flag>`` of the same name."""

    name: str = "random"
    path: str | None = None
    num_prompts: int = 1000
    seed: int = 0
    request_id_prefix: str | None = "bench-"  # None: bench-<8 random hex>- drawn per sample, as vLLM
    shuffle: bool = True
    oversample: bool = True
    # sharegpt
    sharegpt_output_len: int | None = None
    sharegpt_min_len: int = 4  # drop prompt or reference output shorter than this
    sharegpt_max_prompt_len: int = 1024
    sharegpt_max_total_len: int = 2048
    # random
    random_input_len: int = 1024
    random_output_len: int = 128
    random_range_ratio: float = 0.0
    random_output_range_ratio: float | None = None  # None: same as random_range_ratio
    random_prefix_len: int = 0
    # prefix_repetition
    prefix_repetition_prefix_len: int = 256
    prefix_repetition_suffix_len: int = 256
    prefix_repetition_num_prefixes: int = 10
    prefix_repetition_output_len: int = 128
    # custom JSONL
    custom_output_len: int = 256  # -1: take each line's "output_tokens"
    skip_chat_template: bool = False  # custom: vLLM wraps each prompt in the chat template
    # --chat-template-kwargs' JSON object, as pairs: passed to apply_chat_template where a
    # dataset renders prompts client-side (custom, speed_bench)
    chat_template_kwargs: tuple[tuple[str, object], ...] = ()
    # spec_bench / speed_bench (datasets/spec_bench.py)
    spec_bench_output_len: int = 256
    spec_bench_category: str | None = None
    speed_bench_output_len: int = 4096
    speed_bench_category: str | None = None
    speed_bench_dataset_subset: str = "qualitative"
    # timed_trace (datasets/timed_trace.py): field names in the trace, chunk size, time unit
    timed_trace_chunk_hash_size: int = 16
    timed_trace_sec_multiplier: float = 1.0
    timed_trace_label_timestamp: str = "timestamp"
    timed_trace_label_input_length: str = "input_length"
    timed_trace_label_output_length: str = "output_length"
    timed_trace_label_hash_ids: str = "hash_ids"
    # weka / agentic (datasets/agentic.py): every length scaled by this, sharing kept
    trace_scale: float = 1.0
    trace_max_wait_s: float | None = None  # weka / agentic: each call's wait capped here (None: as stated)
    agentic_shape: tuple[tuple[str, str], ...] = ()  # agentic: --agentic-shape KEY=VALUE pairs over Shape's defaults
    # weka / otel: the AgentX-style locked scenario (datasets/agentx.py, loadgen/agentx.py)
    agentic_locked: bool = False
    agentic_min_duration_s: float = 900.0  # --agentic-locked: a shorter run is invalid (AGENTX_MIN_DURATION_S)
    # hf (datasets/hf.py): a local copy of a hub dataset; hf_name picks vLLM's recipe for it
    hf_name: str | None = None
    hf_split: str | None = None  # None: the recipe's default split, as vLLM
    hf_subset: str | None = None
    hf_output_len: int | None = None  # None: the recipe's (fixed, or each row's reference)
    hf_stream: bool = True  # --no-stream: load whole (its shuffle is then a permutation, not a buffer)
    blazedit_min_distance: float = 0.0
    blazedit_max_distance: float = 1.0


@dataclass(frozen=True, slots=True)
class TokenizerSpec:
    """Where a tokenizer comes from: a local folder/file, or a hub id looked up in
    the local Hugging Face cache (never downloaded)."""

    name_or_path: str
    trust_remote_code: bool = False


@dataclass(frozen=True, slots=True)
class LoadSpec:
    """When requests go out — the one source of the rate and the concurrency cap."""

    request_rate: float = float("inf")  # inf: every request at t0
    burstiness: float = 1.0  # gamma shape of the gaps; 1 = Poisson
    max_concurrency: int | None = None  # requests in flight at most (the client's cap), whole run
    # agentic sessions: sessions under way at most (lanes: a session holds one from its start until its
    # last call ends; the next waits for a lane), as AgentX's --concurrency; None: every session at its start
    max_sessions: int | None = None
    workers: int = 1  # client processes sharing one schedule (loadgen/workers.py)
    ray: str | None = None  # a Ray cluster's address ("auto": the local one): one shard per node
    ray_connect_timeout_s: float = 30.0  # a Ray head that does not answer in this long is an error, not a hang
    num_warmups: int = 0
    ready_check_timeout_s: int = 0
    # --ramp-up-strategy: the rate moves from start to end rps over the request sequence
    # (loadgen/arrivals.ramp_rates); request_rate is then unused (vLLM refuses both)
    ramp_up_strategy: str | None = None  # linear | exponential
    ramp_up_start_rps: float | None = None
    ramp_up_end_rps: float | None = None
    # None: the dataset decides (timed_trace replays its timestamps); False: the rate above
    self_timed: bool | None = None
    probe_request_rate: float = 0.0  # one-token probes beside the load, outside the cap; 0: none
    # stop rules (loadgen/watch.py): "off" | "judge" (report only: each point of a sweep) | "stop"
    saturation: str = "off"
    stop_on_errors: int | None = None  # end the run once this many requests failed
    stop_on_error_rate: tuple[float, float] | None = None  # (share, window s): end once failures reach it


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """Where the requests go and how they are addressed."""

    base_url: str = "http://127.0.0.1:8000"
    backend: str = "openai"  # vllm | openai | openai-chat
    endpoint: str | None = None  # None: the backend's default path
    model: str | None = None  # None: the server's first model (asked at run time)
    served_model_name: str | None = None  # the name sent in requests (default: model)
    headers: tuple[tuple[str, str], ...] = ()
    verify_tls: bool = True
    profile: bool = False  # POST /start_profile before the run and /stop_profile after it


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """What every request body carries besides its prompt."""

    ignore_eos: bool = False
    # temperature, top_p, top_k, min_p, frequency/presence/repetition_penalty: only those given
    sampling: tuple[tuple[str, float], ...] = ()
    extra_body: tuple[tuple[str, object], ...] = ()  # --extra-body's JSON object, as pairs
    logprobs: int | None = None  # completions: always sent (null when not given), as vLLM
    lora_modules: tuple[str, ...] = ()  # model name per request, drawn from these
    lora_assignment: str = "random"  # random | round-robin | uniform | identical | distinct | zipf:ALPHA
    use_beam_search: bool = False  # accepted; vLLM 0.32's bench serve sends nothing for it either
    traceparent: bool = False  # send a W3C traceparent with each request; its trace id kept in the record
    # --structured-share of the requests carry a structured-output constraint (datasets/structured.py)
    structured_share: float = 0.0
    structured_kind: str = "mix"  # json | regex | choice | mix
    structured_field: str = "structured_outputs"  # the request field carrying it | response_format (json only)
    # --session-tools: agentic chat sessions carry the committed tools with this tool_choice
    # ("auto" | "required"; datasets/agentic_chat.TOOLS); None: no tools
    tool_choice: str | None = None


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """What the run prints and writes."""

    label: str | None = None
    save_result: bool = False
    append_result: bool = False
    save_detailed: bool = False
    result_dir: str | None = None
    result_filename: str | None = None
    metadata: tuple[tuple[str, str], ...] = ()
    percentile_metrics: tuple[str, ...] = ("ttft", "tpot", "itl")
    metric_percentiles: tuple[float, ...] = (99.0,)
    goodput: tuple[tuple[str, float], ...] = ()  # SLO in ms per metric
    progress: bool = True
    telemetry: bool = True
    telemetry_interval_s: float = 0.25
    plot_timeline: bool = False  # <result>.timeline.html: each request's wait, prefill and ITLs
    plot_dataset_stats: bool = False  # <result>.dataset_stats.png: prompt/output length histograms
    timeline_itl_thresholds_ms: tuple[float, float] = (25.0, 50.0)  # ITL colours: green/orange/red
    gpu_hour_cost: float | None = None  # $ per GPU-hour: the result's cost per million tokens
    # also write the llm-d Benchmark Report v0.2.1 beside the result (results/foreign/llmd.py); its
    # experiment id: a study's name, shared by its runs (None: the run's own)
    llmd_report: bool = False
    llmd_experiment: str | None = None


@dataclass(frozen=True, slots=True)
class MultiTurnSpec:
    """``--multi-turn``: replay each conversation of the dataset turn by turn (servelab only)."""

    enabled: bool = False
    think_time_s: float = 0.0  # pause between a reply's end and the next turn's send
    history: bool = True  # False: each turn sent alone (the control for a prefix-cache comparison)
    max_turns: int | None = None  # None: every turn a conversation has


@dataclass(frozen=True, slots=True)
class QualitySpec:
    """``--quality-*``: judge the run's answers after it (quality/): against a reference run's
    (then its repeats, the floor) and on tasks with known answers (``builtin`` or a JSONL)."""

    references: tuple[str, ...] = ()  # result files: the reference, then its repeats
    tasks: str | None = None
    tasks_seed: int = 0
    ratio: float = 0.99  # the candidate's task score must be >= ratio x the reference's

    @property
    def judged(self) -> bool:
        return bool(self.references) or self.tasks is not None


@dataclass(frozen=True, slots=True)
class BenchSpec:
    """One bench run's settings, parsed once where they enter (flags, a study file, a
    sweep) and varied with ``dataclasses.replace``. ``argv`` is identity only: what is
    shown and hashed into a run's marker, never parsed again."""

    server: ServerSpec = ServerSpec()
    load: LoadSpec = LoadSpec()
    request: RequestSpec = RequestSpec()
    output: OutputSpec = OutputSpec()
    dataset: DatasetSpec = DatasetSpec()
    multi_turn: MultiTurnSpec = MultiTurnSpec()
    tokenizer: str | None = None  # --tokenizer; None: the model's own if found locally, else bundled Qwen3
    trust_remote_code: bool = False
    tokenizer_mode: str = "auto"  # auto | hf: Hugging Face tokenizers (mistral_common's are not loaded)
    skip_tokenizer_init: bool = False  # no tokenizer: lengths from the server's usage only
    # --simulate: (sim.model.EngineLimits, sim.model.StepModel) — the run happens in the
    # simulator, no server; None: a real server is measured. (Typed loosely: sim/ is layer 1.)
    simulate: tuple | None = None
    # The --sim-* values given other than their defaults, as (dest, value) pairs
    # (sim.options.given): parsed with or without --simulate, because a tuner simulates this
    # workload later (tune --simulate, optimize --simulate-first) with
    # sim.options.engine_from_flags, and so a run's identity holds them. () : the defaults.
    sim_flags: tuple[tuple[str, Any], ...] = ()
    quality: QualitySpec | None = None  # None: the answers are not judged
    argv: tuple[str, ...] = ()

    @property
    def seed(self) -> int:
        return self.dataset.seed

    @property
    def driver(self) -> str:
        """Where the load runs: a key of ``measure.drivers.DRIVERS``."""
        if self.simulate is not None:
            return "simulated_sessions" if self.dataset.name in AGENTIC_DATASETS else "simulated"
        if self.multi_turn.enabled:
            return "conversations"
        if self.dataset.name in AGENTIC_DATASETS:  # a session whole on one worker or node
            return "sessions_ray" if self.load.ray is not None else "sessions_workers" if self.load.workers > 1 \
                else "sessions"
        if self.load.ray is not None:
            return "ray"
        return "workers" if self.load.workers > 1 else "local"

    def into(self, folder: str | os.PathLike, result_file: str, label: str, **output) -> BenchSpec:
        """This spec with its result written to ``folder/result_file`` alone (saved, not appended),
        labelled ``label``: a run in its run folder (a study's, a replica's, a simulated config's).
        ``result_file`` is the caller's (``results.layout.RESULT_FILE``: that layer names the files);
        ``output``: any other output field the caller sets (a replica's run shows no progress bar)."""
        out = dataclasses.replace(self.output, save_result=True, append_result=False, result_dir=str(folder),
                                  result_filename=result_file, label=label, **output)
        return dataclasses.replace(self, output=out)

    def flags(self) -> dict:
        """The spec as one flat dict named like the flags (``dataset_name``, ``max_concurrency``,
        ``multi_turn_history``…); header values redacted (their names kept)."""
        dataset = {("dataset_" + k if k in ("name", "path") else k): v
                   for k, v in dataclasses.asdict(self.dataset).items()}
        groups = (self.server, self.load, self.request, self.output)
        flags = {k: v for g in groups for k, v in dataclasses.asdict(g).items()}
        flags["headers"] = [(name, "***") for name, _ in self.server.headers]
        multi = {f"multi_turn_{k}": v for k, v in dataclasses.asdict(self.multi_turn).items()}
        return {**flags, **dataset, **multi, "tokenizer": self.tokenizer, "trust_remote_code": self.trust_remote_code,
                "tokenizer_mode": self.tokenizer_mode, "skip_tokenizer_init": self.skip_tokenizer_init}
