"""Agentic sessions as chat requests with tool calls (loadgen/tool_turns.py), checked against the
mock's own log: what each request carried, when it arrived (the mock's clock), what it was told."""

from __future__ import annotations

import json
from pathlib import Path

from driven import drive

from servelab.config import BenchSpec, DatasetSpec, LoadSpec, OutputSpec, RequestSpec, ServerSpec
from servelab.datasets.agentic_chat import DEFAULT_ARGUMENTS, TOOLS, separated
from servelab.loadgen.tool_turns import IGNORE_EOS, REQUIRED_RAN_OUT, chat_line

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "agentic_weka.jsonl"


def replay(mock, tok: str, tool_choice: str | None = "auto", ignore_eos: bool = False):
    spec = BenchSpec(server=ServerSpec(base_url=mock.url, backend="openai-chat", model="mock"),
                     load=LoadSpec(num_warmups=0), request=RequestSpec(tool_choice=tool_choice, ignore_eos=ignore_eos),
                     dataset=DatasetSpec(name="weka", path=str(EXAMPLE), request_id_prefix="r-"),
                     output=OutputSpec(progress=False, telemetry=False), tokenizer=tok)
    run = drive(spec, mock=mock)
    bodies = {r["headers"]["x-request-id"]: json.loads(r["body"]) for r in mock.truth().received
              if r["path"] == "/v1/chat/completions"}
    return run.work, run.tokenizer, run.drove.sections["agentic"], run.tally.records(), mock.truth().by_id(), bodies


def test_a_tool_call_is_answered_by_its_id_with_the_stated_result_after_the_tools_wait(mock_server, qwen3_path):
    mock = mock_server(ttft_ms=20, itl_ms=2, eos_len=4, keep_requests=True)
    work, tok, section, records, truth, bodies = replay(mock, qwen3_path)
    assert len(bodies) == 8 and all(b["tools"] == list(TOOLS) and b["tool_choice"] == "auto" for b in bodies.values())
    s = work.sessions[0]  # fix-bug: call 0 (main) spawns explore1 (1, 2) and explore2 (3); 4 joins them

    def ids(k):
        return separated(work.blocks.prompt(s, k), s.block_size, tok.block_separator)

    # the mock answers a user's turn with a tool call: the next call of that agent carries the
    # call (the mock's own id) and a tool message with the matching id, the result being the
    # tokens the trace added beyond the call's input and output
    for prev, k in ((0, 4), (1, 2)):
        told = truth[f"r-fix-bug-{prev}"].tool_call_id
        assert told == f"chatcmpl-tool-r-fix-bug-{prev}"
        msgs = bodies[f"r-fix-bug-{k}"]["messages"]
        assert [m["role"] for m in msgs] == ["user", "assistant", "tool"]
        assert msgs[1]["tool_calls"][0]["id"] == told and msgs[2]["tool_call_id"] == told
        assert json.loads(msgs[1]["tool_calls"][0]["function"]["arguments"]) == {"path": "quick brown fox"}
        lo, hi = s.calls[prev].input_len + s.calls[prev].output_len, s.calls[k].input_len
        assert msgs[0]["content"] == tok.decode(ids(k)[:s.calls[prev].input_len])
        assert msgs[2]["content"] == tok.decode(ids(k)[lo:hi])
        assert section["per_session"][0]["tool_result_tokens"][k] == hi - lo > 0
        # sent after the tool's wait, on the mock's clock: from its last write for the call before
        wait = max(s.calls[k].wait_s, 0)
        last = max(truth[f"r-fix-bug-{p}"].event_ns[-1] for p in s.calls[k].parents)
        assert truth[f"r-fix-bug-{k}"].recv_ns - last >= round(wait * 1e9)
    assert s.calls[4].wait_s == 0.3 and s.calls[2].wait_s == 0.2  # the waits checked above are real ones
    # a block starts with the separator in every message it lands in whole
    assert all(t == tok.block_separator for t in ids(4)[::s.block_size])
    # per turn: whether the reply was a tool call (as the mock says it answered), TTFT and E2E
    for si, per in enumerate(section["per_session"]):
        sid = work.sessions[si].session_id
        assert per["tool_call"] == ["server" if truth[f"r-{sid}-{k}"].tool_call_id else None
                                    for k in range(per["calls"])]
        assert all(t is not None and e >= t for t, e in zip(per["ttft_ms"], per["e2e_ms"]))
    assert section["per_session"][0]["tool_call"] == ["server", "server", None, "server", None]
    # the drift: the mock's own count of what it received against the trace's input lengths
    drift = [truth[f"r-{ss.session_id}-{k}"].prompt_tokens - c.input_len
             for ss in work.sessions for k, c in enumerate(ss.calls)]
    chat = section["chat"]
    assert chat["prompt_tokens_drift"] == {"calls": 8, "mean": round(sum(drift) / 8, 3), "max": max(drift, key=abs),
                                           "share": round(sum(drift) / sum(c.input_len for ss in work.sessions
                                                                           for c in ss.calls), 4)}
    assert chat["tool_calls"] == {"server": 5, "script": 0, "tool_results_sent": 3} and chat["warnings"] == []
    assert {r.prompt_len for r in records} == {t.prompt_tokens for t in truth.values()}
    assert chat_line(chat).startswith("servelab: agentic chat: server's prompt tokens − the trace's: mean ")


def test_a_scripted_tool_turn_sends_a_call_of_its_own_when_the_server_answers_text(mock_server, qwen3_path):
    mock = mock_server(eos_len=3, tool_calls="never", keep_requests=True)
    work, _, section, _, truth, bodies = replay(mock, qwen3_path)
    assert all(t.tool_call_id is None for t in truth.values())
    msgs = bodies["r-add-test-1"]["messages"]  # add-test's call 0 stopped with tool_use: call 1 is its result
    call = msgs[1]["tool_calls"][0]
    assert call == {"id": "call-r-add-test-0", "type": "function",
                    "function": {"name": "read_file", "arguments": DEFAULT_ARGUMENTS}}
    assert msgs[1]["content"] and msgs[2] == {**msgs[2], "role": "tool", "tool_call_id": "call-r-add-test-0"}
    assert section["per_session"][1]["tool_call"] == ["script", None, None]
    assert section["chat"]["tool_calls"] == {"server": 0, "script": 3, "tool_results_sent": 3}


def test_without_tools_the_history_is_plain_chat(mock_server, qwen3_path):
    mock = mock_server(eos_len=3, keep_requests=True)
    _, _, section, _, truth, bodies = replay(mock, qwen3_path, tool_choice=None)
    assert all("tools" not in b for b in bodies.values()) and all(t.tool_call_id is None for t in truth.values())
    assert [m["role"] for m in bodies["r-fix-bug-4"]["messages"]] == ["user", "assistant", "user"]
    assert section["chat"]["tools"] is False and section["chat"]["tool_calls"]["tool_results_sent"] == 0


def test_required_running_to_max_tokens_and_ignore_eos_with_tools_are_counted_warnings(mock_server, qwen3_path):
    mock = mock_server()  # no end of sequence: every reply runs to its max_tokens
    *_, section, _, truth, _ = replay(mock, qwen3_path, tool_choice="required", ignore_eos=True)
    assert all(t.finish_reason == "length" and t.tool_call_id for t in truth.values())
    warned = {w["warning"]: w["count"] for w in section["chat"]["warnings"]}
    assert warned == {IGNORE_EOS: 1, REQUIRED_RAN_OUT: 8}
    assert "warning (8×): tool_choice \"required\" ran to max_tokens" in chat_line(section["chat"])


def test_session_tools_need_chat_requests_and_an_agentic_dataset():
    import pytest

    from servelab.spec_checks import check_spec
    from servelab.errors import InputError

    with pytest.raises(InputError, match="^--session-tools sends tool calls, which need chat requests: add "
                                         "--backend openai-chat$"):
        check_spec(BenchSpec(dataset=DatasetSpec(name="agentic"), request=RequestSpec(tool_choice="auto")))
    with pytest.raises(InputError, match="^--session-tools is for --dataset-name weka or otel or agentic, not random$"):
        check_spec(BenchSpec(server=ServerSpec(backend="openai-chat"), request=RequestSpec(tool_choice="auto")))
    check_spec(BenchSpec(server=ServerSpec(backend="openai-chat"), dataset=DatasetSpec(name="agentic"),
                         request=RequestSpec(tool_choice="required")))
    from servelab.sim.model import EngineLimits, StepModel

    with pytest.raises(InputError, match=r"^--simulate replays sessions as token ids: not with --backend openai-chat"):
        check_spec(BenchSpec(server=ServerSpec(backend="openai-chat"), dataset=DatasetSpec(name="agentic"),
                             simulate=(EngineLimits(), StepModel())))
    with pytest.raises(InputError, match=r"conflicts with: --backend openai-chat \(the locked replay sends token ids\)$"):
        check_spec(BenchSpec(server=ServerSpec(backend="openai-chat"), request=RequestSpec(ignore_eos=True),
                             dataset=DatasetSpec(name="weka", path="t", agentic_locked=True)))


def test_the_synthetic_generators_tool_turns_each_send_a_tool_message(mock_server, qwen3_path):
    mock = mock_server(eos_len=3, keep_requests=True)
    spec = BenchSpec(server=ServerSpec(base_url=mock.url, backend="openai-chat", model="mock"),
                     load=LoadSpec(num_warmups=0), request=RequestSpec(tool_choice="auto"),
                     dataset=DatasetSpec(name="agentic", num_prompts=2, seed=3, trace_scale=0.25, request_id_prefix="g-",
                                         agentic_shape=(("tool_wait_s", "0.01"),)),
                     output=OutputSpec(progress=False, telemetry=False), tokenizer=qwen3_path)
    run = drive(spec)
    work, drove = run.work, run.drove
    bodies = {r["headers"]["x-request-id"]: json.loads(r["body"]) for r in mock.truth().received
              if r["path"] == "/v1/chat/completions"}
    sent = 0
    for s in work.sessions:
        for k, call in enumerate(s.calls):
            last = bodies[f"g-{s.session_id}-{k}"]["messages"][-1]
            assert (last["role"] == "tool") == call.tool_result
            sent += call.tool_result
    assert sent > 0 and drove.sections["agentic"]["chat"]["tool_calls"]["tool_results_sent"] == sent
