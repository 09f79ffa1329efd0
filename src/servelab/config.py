"""User-facing specs (layer 0): plain frozen values built from flags or files.

Defaults follow ``vllm bench serve`` so the same flags mean the same traffic.
"""

from __future__ import annotations

from dataclasses import dataclass

# vLLM's --dataset-name choices; datasets.UNSUPPORTED says why some stop with an error here.
DATASET_NAMES = ("sharegpt", "burstgpt", "random", "random-mm", "random-rerank", "hf", "custom", "custom_audio",
                 "custom_image", "prefix_repetition", "spec_bench", "speed_bench", "timed_trace")
# The one list of engine kinds (``engines.kinds.ENGINES`` implements each; every --engine offers
# these). embedded: the offline default — vLLM's CPU build serving SmolLM2-135M-Instruct.
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
    workers: int = 1  # client processes sharing one schedule (loadgen/workers.py)
    ray: str | None = None  # a Ray cluster's address ("auto": the local one): one shard per node
    num_warmups: int = 0
    ready_check_timeout_s: int = 0


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


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """What every request body carries besides its prompt."""

    ignore_eos: bool = False
    sampling: tuple[tuple[str, float], ...] = ()  # temperature, top_p, top_k, min_p when given
    extra_body: tuple[tuple[str, object], ...] = ()  # --extra-body's JSON object, as pairs


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
    tokenizer: str | None = None  # --tokenizer; None: the model's own if found locally, else bundled Qwen3
    trust_remote_code: bool = False
    # --simulate: (sim.model.EngineLimits, sim.model.StepModel) — the run happens in the
    # simulator, no server; None: a real server is measured. (Typed loosely: sim/ is layer 1.)
    simulate: tuple | None = None
    argv: tuple[str, ...] = ()

    @property
    def seed(self) -> int:
        return self.dataset.seed
