"""What the mock server does: its schedule, its failures, where it listens.

One frozen value; every field has the CLI flag of the same name (``--ttft-ms``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from servelab.errors import InputError
from servelab.mock.answers import ANSWER_MODES

# http500: an error status with vLLM's JSON error body, sent at once, before any stream.
# abort:   the connection is closed mid-stream, half way through the content events.
# stall:   the stream stops half way and stays open (the client must time out).
FAILURE_KINDS = ("http500", "abort", "stall")
# When a chat request that carries ``tools`` is answered with a tool call (its ``tool_choice``
# "required" or a named function: always; "none": never): "user" when its last message is the
# user's (an agent loop: a tool call, then text once the tool's result is back), "always", "never"
TOOL_CALL_RULES = ("user", "always", "never")


@dataclass(frozen=True, slots=True)
class MockConfig:
    """Schedule: event ``j`` (0-based) of a request is written at
    ``admit + ttft_ms + j * itl_ms``, where ``admit`` is when the request was parsed
    (or left the waiting queue when ``max_open`` is set). ``itl_ms`` is the gap between
    content *events*; each event carries ``tokens_per_event`` tokens (the last may carry
    fewer).

    Output length: ``output_len`` (an int, or ``(lo, hi)`` drawn uniformly per request)
    overrides the request's ``max_tokens``; ``None`` obeys it (``default_max_tokens``
    when absent). With ``eos_len`` set, a request stops at that length with
    finish_reason "stop" unless it asks ``ignore_eos``.
    """

    ttft_ms: float = 0.0
    itl_ms: float = 0.0
    output_len: int | tuple[int, int] | None = None
    tokens_per_event: int = 1
    eos_len: int | None = None
    default_max_tokens: int = 16
    error_rate: float = 0.0
    failure_kinds: tuple[str, ...] = ("http500",)
    seed: int = 0
    model: str = "mock"
    max_model_len: int = 2048
    # refuse a prompt of max_model_len tokens or more with vLLM 0.32's 400 (renderers/params.py);
    # off by default: /v1/models reports the length, nothing else obeys it
    enforce_max_model_len: bool = False
    host: str = "127.0.0.1"
    port: int = 8000
    close_after_response: bool = False
    max_open: int | None = None
    # a reasoning model: the first reasoning_len tokens of a streamed chat reply are sent as
    # ``delta.reasoning`` (vLLM 0.32's field), the rest as ``delta.content``; an event is
    # reasoning when its first token is (with tokens_per_event > 1 it rounds up to events)
    reasoning_len: int = 0
    record_messages: bool = False  # keep each chat request's messages in the truth
    root: str | None = None  # /v1/models' "root" (the path vLLM serves); None: the model name
    keep_requests: bool = False  # the truth keeps every request's method, path, headers and body
    # what the mock says (mock/answers.py): "cycle" (the same words for every request) or
    # "prompt" (per prompt, greedy: the same prompt gets the same answer on every run)
    answers: str = "cycle"
    corrupt_rate: float = 0.0  # with answers "prompt": the share of prompts whose answer is corrupted
    corrupt_seed: int = 0  # which prompts, and from which token (another seed: other ones)
    ignore_temperature: bool = False  # answer greedily even when a request asks temperature > 0
    answer_key: str | None = None  # a JSON object {prompt: reply}: prompts it knows are answered so
    # a request's structured-output constraint (mock/constrained.py) is honoured unless this is set
    ignore_constraints: bool = False
    tool_calls: str = "user"  # TOOL_CALL_RULES: when a request with tools gets a tool call back

    def __post_init__(self) -> None:
        _check(self.ttft_ms >= 0 and self.itl_ms >= 0, "--ttft-ms and --itl-ms must be >= 0")
        _check(self.tokens_per_event >= 1, "--tokens-per-event must be >= 1")
        _check(0.0 <= self.error_rate <= 1.0, "--error-rate must be in [0, 1]")
        _check(bool(self.failure_kinds), "--failure-kinds needs at least one kind")
        bad = [k for k in self.failure_kinds if k not in FAILURE_KINDS]
        _check(not bad, f"--failure-kinds: unknown {bad}; choose from {', '.join(FAILURE_KINDS)}")
        _check(self.max_open is None or self.max_open >= 1, "--max-open must be >= 1")
        _check(self.eos_len is None or self.eos_len >= 1, "--eos-len must be >= 1")
        _check(self.reasoning_len >= 0, "--reasoning-len must be >= 0")
        _check(self.tool_calls in TOOL_CALL_RULES, f"--tool-calls: choose from {', '.join(TOOL_CALL_RULES)}")
        _check(self.answers in ANSWER_MODES, f"--answers: choose from {', '.join(ANSWER_MODES)}")
        _check(0.0 <= self.corrupt_rate <= 1.0, "--corrupt-rate must be in [0, 1]")
        quality = self.corrupt_rate > 0 or self.ignore_temperature or self.answer_key is not None
        _check(self.answers == "prompt" or not quality,
               "--corrupt-rate, --ignore-temperature and --answer-key need --answers prompt")
        lo, hi = self.output_len_range or (1, 1)
        _check(1 <= lo <= hi, "--output-len must be N or LO:HI with 1 <= LO <= HI")

    @property
    def output_len_range(self) -> tuple[int, int] | None:
        if self.output_len is None:
            return None
        if isinstance(self.output_len, int):
            return (self.output_len, self.output_len)
        lo, hi = self.output_len
        return (int(lo), int(hi))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["failure_kinds"] = list(self.failure_kinds)
        if isinstance(self.output_len, tuple):
            d["output_len"] = list(self.output_len)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> MockConfig:
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in known}
        if isinstance(kw.get("output_len"), list):
            kw["output_len"] = tuple(kw["output_len"])
        if "failure_kinds" in kw:
            kw["failure_kinds"] = tuple(kw["failure_kinds"])
        return cls(**kw)


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise InputError(message)
