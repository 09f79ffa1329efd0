"""A run's requests as the bytes sent: one body and header set per request, the first
ones built before the clock starts, the rest when a sender takes them."""

from __future__ import annotations

from servelab.client import openai, trace
from servelab.client.http import Pool
from servelab.errors import InputError
from servelab.loadgen.values import BenchConfig
from servelab.records import SampleRequest


def serialize(config: BenchConfig, s: SampleRequest, pool: Pool, request_id: str) -> bytes:
    model = config.request_models.get(s.request_id, config.model)
    own = config.request_fields.get(s.request_id)
    extra = {**config.extra_body, **own} if own else config.extra_body
    messages = config.chat_messages.get(s.prompt) if config.chat_messages else None
    if messages is not None:  # a conversation, sent whole (a chat endpoint: values.BenchConfig)
        body = openai.messages_body(model, messages, s.expected_output_len, config.ignore_eos, extra)
    else:
        body = openai.request_body(config.kind, model, s.prompt, s.expected_output_len,
                                   config.ignore_eos, extra, config.logprobs)
    return pool.build("POST", config.endpoint, body, headers(config, request_id))


def headers(config: BenchConfig, request_id: str) -> dict:
    """A request's headers: auth, the user's --header, its id, and its traceparent (--traceparent)."""
    out = {"Content-Type": "application/json", **config.auth_headers(), **config.headers, "X-Request-Id": request_id}
    if config.traceparent:
        out[trace.HEADER] = trace.traceparent(config.seed, request_id)
    return out


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
