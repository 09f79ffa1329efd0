"""Agentic sessions over /v1/chat/completions, tool calls included (``--backend openai-chat``,
``--session-tools auto|required``): each call's messages are built when it is sent, from its
blocks' text and the replies its agent got before it (datasets/agentic_chat.py).

A reply is parsed as its call ends (``answered``), on the clock, as a multi-turn run parses
a turn: the agent's next call needs it. A reply that is a tool call (``tool_calls`` in the
stream), or one the trace says was (``stop: tool_use``, ``input_types: tool_result``, the
synthetic generator's tool turns), is sent back as the assistant's ``tool_calls`` entry and
a ``role: "tool"`` message of the stated length, after the next call's wait (the tool's run
time: the driver's schedule, loadgen/sessions.py).

Reported (the ``chat`` part of the result's ``servelab.agentic``): per call whether its reply
was a tool call (the server's, or scripted) and whether it carried a tool result; the drift
between the tokens the trace meant (``input_len``) and the server's ``usage.prompt_tokens``;
and two counted warnings: ``ignore_eos`` with tools (it keeps generating past a tool call's
end, against the tool-call grammar), and a ``tool_choice: "required"`` turn that ran to
max_tokens (vLLM's required-tool grammar has no end, vllm#50399).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from servelab.client import openai
from servelab.client.http import Pool
from servelab.client.sse import parse_events
from servelab.datasets import agentic_chat
from servelab.datasets.agentic import Sessions
from servelab.errors import InputError
from servelab.loadgen.pacer import Attempt
from servelab.loadgen.payloads import headers
from servelab.loadgen.values import BenchConfig

IGNORE_EOS = ("ignore_eos is set with tools: the server generates past a tool call's end, against the "
              "tool-call grammar (drop --ignore-eos)")
REQUIRED_RAN_OUT = ('tool_choice "required" ran to max_tokens: the required-tool grammar has no end '
                    "(vllm#50399)")


@dataclass(slots=True)
class ChatTurns:
    """One run's chat sessions: each call's messages as it is sent, each reply as it ends."""

    config: BenchConfig
    work: Sessions
    tokenizer: object
    replies: dict[int, dict] = field(default_factory=dict)  # request index -> its assistant message
    tool_call: dict[int, str | None] = field(default_factory=dict)  # request index -> "server" | "script" | None
    tool_result: dict[int, int] = field(default_factory=dict)  # request index -> tool-result tokens it carried
    drift: dict[int, int] = field(default_factory=dict)  # request index -> usage.prompt_tokens − input_len
    warnings: dict[str, int] = field(default_factory=dict)  # one line -> how many times
    scripted: list[list[bool]] = field(default_factory=list)  # per session, per call: the trace says tool call

    def __post_init__(self) -> None:
        if self.tokenizer is None:
            raise InputError("chat sessions decode their blocks to text: they need a tokenizer "
                             "(not --skip-tokenizer-init)")
        self.scripted = [agentic_chat.scripted(s) for s in self.work.sessions]
        if self.config.tool_choice and self.config.ignore_eos:
            self.warnings[IGNORE_EOS] = 1

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids)

    def _ids(self, si: int, k: int) -> list[int]:
        s = self.work.sessions[si]
        return agentic_chat.separated(self.work.blocks.prompt(s, k), s.block_size, self.tokenizer.block_separator)

    def payload(self, pool: Pool, si: int, k: int, i: int) -> bytes:
        """Call ``k`` of session ``si`` (request ``i``): its messages, its tools."""
        s, first = self.work.sessions[si], self.work.first()[si]
        said = {a: self.replies[first + a] for a in agentic_chat.chain(s, k)}
        msgs = agentic_chat.messages(s, k, self._ids(si, k), said, self._decode)
        if msgs[-1]["role"] == "tool":
            self.tool_result[i] = agentic_chat.tool_result_len(s, k)
        return self._body(pool, msgs, self.work.requests[i])

    def probe(self, pool: Pool, ids: list[int], sample) -> bytes:
        """The ready check's and warm-ups' request: ``ids`` as one user message."""
        block = self.work.sessions[0].block_size
        text = self._decode(agentic_chat.separated(ids, block, self.tokenizer.block_separator))
        return self._body(pool, [{"role": "user", "content": text}], sample)

    def _body(self, pool: Pool, msgs: list[dict], sample) -> bytes:
        extra = dict(self.config.extra_body)
        if self.config.tool_choice:
            extra = {"tools": list(agentic_chat.TOOLS), "tool_choice": self.config.tool_choice, **extra}
        body = openai.messages_body(self.config.model, msgs, sample.expected_output_len, self.config.ignore_eos, extra)
        return pool.build("POST", self.config.endpoint, body, headers(self.config, sample.request_id))

    def answered(self, si: int, k: int, i: int, attempt: Attempt) -> None:
        """Keep a reply that answered: the assistant message its agent's later calls carry."""
        resp = attempt.response
        if resp is None or resp.error or resp.status != 200:
            return
        stream = openai.interpret("chat", parse_events(resp.reads))
        if stream.prompt_tokens is not None:
            self.drift[i] = int(stream.prompt_tokens) - self.work.sessions[si].calls[k].input_len
        tools_on = bool(self.config.tool_choice)
        script = self.work.requests[i].request_id if tools_on and self.scripted[si][k] else None
        self.replies[i], self.tool_call[i] = agentic_chat.reply(stream.answer, stream.tool_calls if tools_on else (),
                                                                f"call-{script}" if script else None)
        if self.config.tool_choice == "required" and stream.finish_reason == "length":
            self.warnings[REQUIRED_RAN_OUT] = self.warnings.get(REQUIRED_RAN_OUT, 0) + 1

    def per_session(self, si: int, first: int, n: int) -> dict:
        """A session's per-call tool figures, in call order (None: the call never answered)."""
        return {"tool_call": [self.tool_call.get(first + k) if first + k in self.replies else None for k in range(n)],
                "tool_result_tokens": [self.tool_result.get(first + k, 0) for k in range(n)]}

    def section(self) -> dict:
        """The ``chat`` part of the result's ``servelab.agentic``."""
        d = list(self.drift.values())
        made = list(self.tool_call.values())
        meant = sum(self.work.requests[i].prompt_len for i in self.drift)
        return {"api": "chat", "tools": self.config.tool_choice is not None, "tool_choice": self.config.tool_choice,
                "separator_token": self.tokenizer.block_separator,
                "tool_calls": {"server": made.count("server"), "script": made.count("script"),
                               "tool_results_sent": len(self.tool_result)},
                "prompt_tokens_drift": {"calls": len(d), "mean": round(sum(d) / len(d), 3) if d else None,
                                        "max": max(d, key=abs) if d else None,
                                        "share": round(sum(d) / meant, 4) if meant else None},
                "warnings": [{"warning": w, "count": n} for w, n in self.warnings.items()]}

def chat_line(chat: dict) -> str:
    """The chat part in one console line: drift, tool calls, warnings."""
    d, t = chat["prompt_tokens_drift"], chat["tool_calls"]
    drift = (f"server's prompt tokens − the trace's: mean {d['mean']:+.1f} ({d['share']:+.1%}), largest "
             f"{d['max']:+d}, over {d['calls']} calls"
             if d["calls"] else "no usage.prompt_tokens reported")
    tools = (f"; tool calls: {t['server']} by the server, {t['script']} scripted, {t['tool_results_sent']} results "
             "sent" if chat["tools"] else "")
    warned = "".join(f"; warning ({w['count']}×): {w['warning']}" for w in chat["warnings"])
    return f"servelab: agentic chat: {drift}{tools}{warned}"
