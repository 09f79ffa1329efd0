"""The simulated engine's parameters: its scheduler limits and its step-time model.

Both are frozen values; vary them with ``dataclasses.replace``. Their ``to_dict`` goes
into a simulated result's ``servelab.simulated`` section, so a number can always be
traced to the model that produced it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from servelab.errors import InputError

NS_PER_S = 1_000_000_000
# Output length of a request that names none. (vLLM's default is the rest of the model's
# length; the simulator needs a number, and both of its modes use this one.)
DEFAULT_OUTPUT_LEN = 256
# How a step's weight read and its token compute overlap: (read^p + compute^p)^(1/p). p = 1 adds
# them, p -> infinity is the roofline's max. 2.5 fits a dense model's linear layers on one H200
# (bench/gpu_roofline.py, bench/measured/h200-roofline-2026-12-04.json: Qwen3-1.7B, 8B and 32B at
# 8 to 8192 tokens in CUDA graphs, median error 1.6 %, worst 5.7 %; adding them: 17 %, worst 45 %).
OVERLAP = 2.5


def overlapped(read_s: float, compute_s: float, p: float) -> float:
    """The time of a weight read and a computation that run in the same kernels (``OVERLAP``)."""
    if read_s <= 0 or compute_s <= 0 or p == 1:  # nothing to overlap, or nothing overlaps: the plain sum
        return read_s + compute_s
    big = max(read_s, compute_s)
    return big * ((read_s / big) ** p + (compute_s / big) ** p) ** (1 / p)


def distinct_experts(experts: int, active: int, tokens: int) -> float:
    """How many of an MoE layer's ``experts`` a step of ``tokens`` tokens reads, each token routed to
    ``active`` of them: the expected count under uniform routing, E x (1 - (1 - k/E)^T). One token
    reads k; a 128-token prefill of Qwen3-30B-A3B nearly all 128. Real routers are skewed (fewer
    distinct experts); vLLM's kernel benchmarks route uniformly, and this count fits them."""
    if experts <= 0 or tokens <= 0:
        return 0.0
    return experts * (1 - (1 - active / experts) ** tokens)


def experts_s(step, tokens: int) -> float:
    """The fused-MoE kernels of a step of ``tokens`` tokens (``StepModel``, ``planner.speed_model.
    StepCosts``): the experts they pick read while the routed tokens compute, overlapping (``OVERLAP``)."""
    if not step.experts:
        return 0.0
    read = step.expert_read_s * distinct_experts(step.experts, step.active_experts, tokens)
    return overlapped(read, step.expert_token_s * tokens, OVERLAP)


MOE_FIELDS = ("expert_read_s", "expert_token_s", "experts", "active_experts")


def fields_of(step) -> dict:
    """A step model's fields (``StepModel``, ``planner.speed_model.StepCosts``); a dense model's
    (no experts) without the MoE ones, so its results read as before they existed."""
    out = asdict(step)
    return out if step.experts else {k: v for k, v in out.items() if k not in MOE_FIELDS}


@dataclass(frozen=True, slots=True)
class StepModel:
    """Seconds one engine step takes, from what it schedules:

        compute = overhead_s + per_seq_s × seqs + overlapped(read_s, per_token_s × tokens)
                  + overlapped(expert_read_s × distinct_experts(tokens), expert_token_s × tokens, OVERLAP)
                  + per_kv_token_s × context + per_attention_s × pairs
        step    = max(floor_s, compute)

    ``seqs``: requests in the step; ``tokens``: tokens computed (prefill chunks + one per
    decoding request); ``context``: KV tokens those requests attend over (their computed
    tokens plus the new ones) — attention reads grow with it. ``pairs``: query x key pairs
    attention computes (a chunk of n new tokens after c computed ones: n x (c + n/2)), whose
    FLOPs make a long prompt's prefill grow faster than its length. ``floor_s``: the
    weight-read floor, the time to stream the weights once from memory, below which no step
    goes. planner/speed_model.py fills these from published runs (``sim_step_model``).
    ``read_s``: the time to read the weights once, which the linear layers' compute hides in part
    (``overlapped`` with exponent ``overlap``: 1 adds them, larger nears the roofline's max); 0 =
    the read is in ``overhead_s`` or the floor.
    ``expert_read_s``: a mixture of experts' read of one routed expert in every MoE layer; a step
    reads as many experts as its tokens pick (``distinct_experts`` of ``experts``, ``active_experts``
    per token), which ``read_s`` leaves out; ``expert_token_s``: the routed experts' compute per
    token, which ``per_token_s`` leaves out. The fused-MoE kernels read and compute together, so the
    two overlap as one H200's GEMMs measured (``OVERLAP``), whatever ``overlap`` is. 0 for a dense model.
    ``request_s``: the API server's cost per request before the engine sees it (parsing,
    tokenizing, queueing); it delays the request's admission and so its TTFT, not any step.
    """

    overhead_s: float = 0.002
    per_seq_s: float = 0.0001
    per_token_s: float = 0.00002
    per_kv_token_s: float = 0.0
    floor_s: float = 0.0
    per_attention_s: float = 0.0
    request_s: float = 0.0
    read_s: float = 0.0
    overlap: float = OVERLAP
    expert_read_s: float = 0.0
    expert_token_s: float = 0.0
    experts: int = 0
    active_experts: int = 0
    source: str = "given"  # where the numbers came from: "given", a planner/calibration name

    def __post_init__(self) -> None:
        for name in ("overhead_s", "per_seq_s", "per_token_s", "per_kv_token_s", "floor_s", "per_attention_s",
                     "request_s", "read_s", "expert_read_s", "expert_token_s"):
            value = getattr(self, name)
            if not value >= 0:  # also rejects NaN
                raise InputError(f"step model: {name} must be >= 0, got {value!r}")
        if self.experts or self.active_experts or self.expert_read_s or self.expert_token_s:  # an MoE
            if not (isinstance(self.experts, int) and isinstance(self.active_experts, int)
                    and 0 < self.active_experts <= self.experts):
                raise InputError(f"step model: a mixture of experts needs whole numbers 0 < active_experts <= "
                                 f"experts, got {self.active_experts!r} of {self.experts!r}")
        if not self.overlap >= 1:
            raise InputError(f"step model: overlap must be >= 1 (1 adds the weight read and the compute), "
                             f"got {self.overlap!r}")
        if (self.overhead_s + self.per_seq_s + self.per_token_s + self.floor_s + self.read_s + self.expert_read_s
                + self.expert_token_s) <= 0:
            raise InputError("step model: every step would take no time; give at least one positive cost")

    def step_ns(self, seqs: int, tokens: int, context: int, pairs: float = 0.0) -> int:
        s = (self.overhead_s + self.per_seq_s * seqs + overlapped(self.read_s, self.per_token_s * tokens, self.overlap)
             + experts_s(self, tokens) + self.per_kv_token_s * context + self.per_attention_s * pairs)
        return max(1, round(max(s, self.floor_s) * NS_PER_S))

    @property
    def request_ns(self) -> int:
        return round(self.request_s * NS_PER_S)

    def to_dict(self) -> dict:
        return fields_of(self)


@dataclass(frozen=True, slots=True)
class EngineLimits:
    """vLLM's scheduler knobs. ``num_blocks × block_size`` is the KV cache in tokens
    (what vLLM logs as ``GPU KV cache size: N tokens``)."""

    max_num_seqs: int = 256
    max_num_batched_tokens: int = 2048
    num_blocks: int = 4096
    block_size: int = 16
    enable_prefix_caching: bool = True

    def __post_init__(self) -> None:
        for name in ("max_num_seqs", "max_num_batched_tokens", "num_blocks", "block_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise InputError(f"sim engine: {name} must be an integer >= 1, got {value!r}")

    @property
    def kv_tokens(self) -> int:
        return self.num_blocks * self.block_size

    def to_dict(self) -> dict:
        return {**asdict(self), "kv_tokens": self.kv_tokens}


def blocks_for_tokens(kv_tokens: int, block_size: int) -> int:
    """vLLM rounds its KV pool down to whole blocks."""
    if kv_tokens < block_size:
        raise InputError(f"sim engine: {kv_tokens} KV tokens do not fill one block of {block_size}")
    return kv_tokens // block_size


@dataclass(frozen=True, slots=True)
class SimRequest:
    """One request for the simulated engine. ``token_ids`` (the prompt's) feed the prefix
    cache; without them the prompt is ``prompt_len`` tokens that share nothing."""

    arrival_ns: int
    prompt_len: int
    output_len: int
    token_ids: tuple[int, ...] | None = None
