"""What one run of the load generator is given (``BenchConfig``) and gives back
(``BenchRun``): the two values every driver, shard and worker passes around."""

from __future__ import annotations

from dataclasses import dataclass, field

from servelab.config import LoadSpec
from servelab.loadgen.pacer import RunOutcome
from servelab.records import RequestRecord


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
    traceparent: bool = False  # a W3C traceparent header on each request (client/trace.py)
    tool_choice: str | None = None  # agentic chat sessions: the tools' tool_choice (None: no tools)
    # request id -> the model name it carries (--lora-modules); others carry ``model``
    request_models: dict = field(default_factory=dict)
    # prompt as sent -> the conversation a chat endpoint is sent whole instead (a custom
    # dataset's ``messages`` lines: datasets/custom.conversations); empty for other runs
    chat_messages: dict = field(default_factory=dict)
    # request id -> fields its body carries besides the shared ones (--structured-share's constraint)
    request_fields: dict = field(default_factory=dict)
    # OPENAI_API_KEY, sent as "Authorization: Bearer"; kept out of repr so no log or
    # result that prints a config can show it
    api_key: str | None = field(default=None, repr=False)

    @property
    def trace_seed(self) -> int | None:
        """What each request's trace id derives from (client/trace.py) when it carries a traceparent; else None."""
        return self.seed if self.traceparent else None

    def auth_headers(self) -> dict:
        """Authorization first, so a --header of the same name overrides it (as in vLLM)."""
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}


@dataclass(frozen=True, slots=True)
class BenchRun:
    """The outcome of one run, before metrics; its records went to the run's sink as they
    were made (whoever made the sink reads them there). Why it ended is decided from it
    once, after the run (measure/ending.py)."""

    outcome: RunOutcome
    wall_start: float  # time.time() at t0, the run's wall-clock anchor
    client_cpu_s: float
    probes: tuple[RequestRecord, ...] = ()  # --probe-request-rate's requests
    stop_rules: dict | None = None  # the stop rules asked for and what they found (loadgen/watch.py)
    stop_rule: str | None = None  # the rule that ended the run, if one did (records.END_REASONS)
    stopped_by: int | None = None  # the signal that stopped the run (SIGINT, SIGTERM), if one did
    ticked: str | None = None  # what the run's tick ended it for (a full disk), if it did
