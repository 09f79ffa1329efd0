"""OpenTelemetry GenAI span exports as agentic sessions (datasets/otel.py): hand-written
OTLP JSON spans, as the Collector's file exporter writes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.config import BenchSpec, DatasetSpec, LoadSpec, OutputSpec, ServerSpec
from servelab.datasets.agentic import Blocks, Call, describe, ideal_hits
from servelab.datasets.agentic_chat import chain
from servelab.datasets.otel import read_otel
from servelab.datasets.sessions import read_sessions
from servelab.errors import DatasetError
from servelab.loadgen.hooks import Hooks
from servelab.measure.drivers import DRIVERS, Bench
from servelab.measure.run import _prepare
from servelab.measure.target import bench_config
from servelab.metrics.tally import Tally
from servelab.results.store import RecordSink
from servelab.sim.kv import block_hashes

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "agentic_otel.jsonl"
T0 = 1_765_000_000_000_000_000


def span(sid: str, parent: str, op: str | None, start: float, end: float, trace: str = "t1", **attrs) -> dict:
    """One OTLP span, times in seconds from T0; attribute names with '.' given as '__'."""
    if op is not None:
        attrs["gen_ai__operation__name"] = op
    return {"traceId": trace, "spanId": sid, "parentSpanId": parent,
            "startTimeUnixNano": str(T0 + round(start * 1e9)), "endTimeUnixNano": str(T0 + round(end * 1e9)),
            "attributes": [{"key": k.replace("__", "."), "value": {"intValue": str(v)} if isinstance(v, int)
                            else {"stringValue": v}} for k, v in attrs.items()]}


def chat(sid, parent, start, end, i=None, o=None, **attrs) -> dict:
    if i is not None:
        attrs["gen_ai__usage__input_tokens"] = i
    if o is not None:
        attrs["gen_ai__usage__output_tokens"] = o
    return span(sid, parent, "chat", start, end, **attrs)


def write(tmp_path: Path, *lines: list[dict]) -> str:
    path = tmp_path / "spans.jsonl"
    path.write_text("".join(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}) + "\n"
                            for spans in lines))
    return str(path)


def test_the_example_export_reads_as_its_sessions():
    got = read_otel(str(EXAMPLE))
    conv, helper = got.sessions
    # two traces share gen_ai.conversation.id conv-1 (a chat's two turns); the third is its own session
    assert (conv.session_id, helper.session_id, conv.block_size) == ("conv-1", "0af7651916cd43dd8448eb211c80319c", 64)
    assert [(c.agent, c.input_len, c.output_len, c.parents, c.wait_s) for c in conv.calls] == [
        ("", 180, 24, (), 0.05),
        ("", 420, 30, (0,), 1.05),  # after the read_file tool (1 s) and 0.05 s of the agent's own
        ("explore", 150, 20, (1,), 0.1),  # two sub-agents spawned by call 1, inside its "task" tool
        ("explore", 260, 16, (2,), 0.6),  # after its grep tool
        ("explore#2", 120, 12, (1,), 0.1),
        ("", 700, 40, (1, 3, 4), 0.7),  # joins both: 0.7 s after the later one ended (5.4 s)
        ("", 740, 20, (5,), 30.1)]  # the user's next turn (another trace): no input count, grown by 700 + 40
    # the growing context as shared blocks: each call of an agent starts with its previous call's blocks
    assert [c.blocks for c in conv.calls][:2] == [(1, 2, 3), (1, 2, 3, 4, 5, 6, 7)]
    assert conv.calls[6].blocks[:11] == conv.calls[5].blocks and conv.calls[2].blocks == (1, 2, 3)
    assert [(c.input_len, c.output_len) for c in helper.calls] == [(90, 10)]  # the inner LLM span is the same call
    assert got.about == {"spans": 17, "tool_spans": 3, "tool_s": 4.5, "calls_without_input_tokens": 1,
                         "concurrent_calls": 0}
    assert describe(got.sessions)["sub_agents"] == 2 and describe(got.sessions)["max_fan_out"] == 2
    # an unbounded cache: 176 of call 0's tokens in call 1, 416 of call 1's in call 5, 688 of call 5's in call 6,
    # 144 of explore's first call in its second
    assert ideal_hits(got.sessions, 16) == (176 + 416 + 688 + 144, 2660)


def test_each_prompt_starts_with_its_agents_previous_prompt_and_the_ideal_is_the_tokens_own():
    sessions = read_otel(str(EXAMPLE)).sessions
    blocks = Blocks(list(range(1000, 3000)))
    conv = sessions[0]
    prompts = [blocks.prompt(conv, k) for k in range(len(conv.calls))]
    for k, before in ((1, 0), (5, 1), (6, 5), (3, 2)):
        assert prompts[k][:len(prompts[before])] == prompts[before]
    assert prompts[2][:64] != prompts[0][:64]  # a sub-agent's context is its own
    seen, hits = set(), 0
    for ids in prompts + [blocks.prompt(sessions[1], 0)]:
        hashes = block_hashes(ids, 16)
        run = 0
        while run < min(len(hashes), (len(ids) - 1) // 16) and hashes[run] in seen:
            run += 1
        hits, seen = hits + run * 16, seen | set(hashes)
    assert ideal_hits(sessions, 16)[0] == hits


def test_a_tool_span_between_calls_is_the_wait_and_a_container_span_is_looked_through(tmp_path):
    path = write(tmp_path, [
        span("root", "", "invoke_agent", 0.0, 9.0, gen_ai__agent__name="a"),
        span("http", "root", None, 0.0, 1.0),  # a framework's own span: its chat is the agent's
        chat("c1", "http", 0.0, 1.0, 100, 10),
        span("inner", "c1", "chat", 0.1, 0.9),  # the provider's span inside the framework's: not a second call
        span("tool", "root", "execute_tool", 1.0, 4.0, gen_ai__tool__name="bash"),
        chat("c2", "root", 4.5, 5.0, 300, 10)])
    (s,) = read_otel(path).sessions
    assert [(c.parents, c.wait_s, c.t_s) for c in s.calls] == [((), 0.0, 0.0), ((0,), 3.5, 4.5)]
    assert read_otel(path).about["tool_s"] == 3.0


def test_sub_agents_fan_out_from_the_call_before_and_a_late_one_is_joined_by_a_later_call(tmp_path):
    path = write(tmp_path, [
        span("root", "", "invoke_agent", 0.0, 20.0),
        chat("c1", "root", 0.0, 1.0, 100, 10),
        span("s1", "root", "invoke_agent", 1.1, 3.0, gen_ai__agent__id="w1"),
        chat("s1c", "s1", 1.2, 3.0, 50, 5),
        span("s2", "root", "invoke_agent", 1.1, 9.0, gen_ai__agent__id="w2"),
        chat("s2c", "s2", 1.2, 9.0, 60, 5),
        chat("c2", "root", 4.0, 5.0, 200, 10),  # s2 still ran: not joined here
        chat("c3", "root", 10.0, 11.0, 300, 10)])  # joins s2
    (s,) = read_otel(path).sessions
    assert [(c.agent, c.parents) for c in s.calls] == [
        ("", ()), ("w1", (0,)), ("w2", (0,)), ("", (0, 1)), ("", (3, 2))]
    assert s.calls[3].wait_s == 1.0 and s.calls[4].wait_s == 1.0  # from the later of the parents' ends


def test_missing_token_counts_grow_from_the_call_before_or_stop_with_one_line(tmp_path):
    grown = write(tmp_path, [chat("c1", "", 0, 1, 100, 10),
                             chat("c2", "", 2, 3, None, None, gen_ai__request__max_tokens=7),
                             chat("c3", "", 4, 5, 50, 5)])
    c1, c2, c3 = read_otel(grown).sessions[0].calls
    assert (c2.input_len, c2.output_len, c2.blocks[:2]) == (110, 7, c1.blocks)  # 100 + 10; max_tokens as output
    assert c3.blocks[0] not in c2.blocks  # fewer input tokens than the prompt before: a rewritten context
    first = write(tmp_path, [chat("c1", "", 0, 1, None, 10)])
    with pytest.raises(DatasetError, match=r"spans\.jsonl:1: resourceSpans\[0\]\.scopeSpans\[0\]\.spans\[0\]\."
                                           r"attributes has no gen_ai\.usage\.input_tokens, and no earlier call of "
                                           r"its agent"):
        read_otel(first)
    no_out = write(tmp_path, [chat("c1", "", 0, 1, 10, None)])
    with pytest.raises(DatasetError, match=r"has no gen_ai\.usage\.output_tokens \(nor gen_ai\.request\.max_tokens\)"):
        read_otel(no_out)


def group(tmp_path: Path, a: tuple = (1.5, 3.0), b: tuple = (2.0, 4.0), out: int = 10) -> str:
    """A call, then two calls of one agent whose spans overlap (B starts before A ended), then a
    call after both: (start, end) in seconds; B ends last by default."""
    return write(tmp_path, [
        span("root", "", "invoke_agent", 0.0, 20.0),
        chat("p", "root", 0.0, 1.0, 100, out),
        chat("a", "root", *a, 200, out),
        chat("b", "root", *b, 150, out),
        chat("j", "root", max(a[1], b[1]) + 1.0, max(a[1], b[1]) + 2.0, 300, out)])


def test_overlapping_calls_of_one_agent_are_siblings_and_the_next_call_joins_them_all(tmp_path):
    got = read_otel(group(tmp_path))
    (s,) = got.sessions
    # B waits for what A waits for (P), its recorded offset from P's end, not for A; J joins both,
    # 1 s after the later end (B's, 4.0 s)
    assert [(c.parents, c.wait_s, c.t_s) for c in s.calls] == [
        ((), 0.0, 0.0), ((0,), 0.5, 1.5), ((0,), 1.0, 2.0), ((1, 2), 1.0, 5.0)]
    # each sibling grows from P (its blocks 1, 2), not from the other; J from B, the one that ended last
    assert [c.blocks for c in s.calls] == [(1, 2), (1, 2, 3, 4), (1, 2, 5), (1, 2, 5, 6, 7)]
    assert got.about["concurrent_calls"] == 1
    assert describe(got.sessions)["calls"] == 4 and describe(got.sessions)["max_fan_out"] == 0
    # A ending last: J continues A (the last of its parents, as a chat replay's history follows it)
    (late,) = read_otel(group(tmp_path, a=(1.5, 4.5), b=(2.0, 3.0))).sessions
    assert (late.calls[3].parents, late.calls[3].blocks[:4]) == ((2, 1), (1, 2, 3, 4))
    assert chain(late, 3) == [0, 1] and chain(s, 3) == [0, 2] and chain(s, 1) == chain(s, 2) == [0]


def test_a_call_starting_while_any_call_of_the_step_runs_is_a_sibling_and_a_sub_agent_spawns_from_one_ended(
        tmp_path):
    path = write(tmp_path, [
        span("root", "", "invoke_agent", 0.0, 20.0),
        chat("a", "root", 1.0, 5.0, 100, 10),
        chat("b", "root", 1.2, 2.0, 120, 10),
        span("w", "root", "invoke_agent", 2.1, 3.0, gen_ai__agent__id="w"),  # spawned by B's tool call
        chat("wc", "w", 2.2, 2.9, 50, 5),
        chat("c", "root", 3.5, 4.0, 80, 10),  # after B ended, A still running: a sibling too
        chat("j", "root", 6.0, 7.0, 300, 10)])
    (s,) = read_otel(path).sessions
    assert [(c.agent, c.parents, c.wait_s) for c in s.calls] == [
        ("", (), 1.0), ("", (), 1.2), ("w", (1,), 0.2),
        ("", (2,), 0.6),  # and it joins the sub-agent that had ended (2.9 s), as any call of its agent would
        ("", (1, 3, 0), 1.0)]  # every call of the step (the sub-agent through C), 1 s after A's end (5 s);
    assert s.calls[4].blocks[:2] == s.calls[0].blocks  # it continues A, the one that ended last (its last parent)


def test_a_sub_agents_overlapping_calls_start_from_its_spawner_and_the_parent_joins_both(tmp_path):
    path = write(tmp_path, [
        span("root", "", "invoke_agent", 0.0, 20.0),
        chat("c1", "root", 0.0, 1.0, 100, 10),
        span("s", "root", "invoke_agent", 1.1, 4.0, gen_ai__agent__id="w"),
        chat("s1", "s", 1.2, 4.0, 50, 5),
        chat("s2", "s", 1.5, 3.0, 60, 5),  # beside s1: spawned by c1 too, 0.5 s after it
        chat("c2", "root", 5.0, 6.0, 200, 10)])
    (s,) = read_otel(path).sessions
    assert [(c.agent, c.parents, c.wait_s) for c in s.calls] == [
        ("", (), 0.0), ("w", (0,), 0.2), ("w", (0,), 0.5), ("", (0, 1, 2), 1.0)]  # c2 joins both of w's calls
    assert s.calls[1].blocks == (1,) and s.calls[2].blocks == (2,)  # a sub-agent's first step is all new


def test_siblings_share_their_predecessors_blocks_not_each_others_in_the_ideal_hit_rate(tmp_path):
    """Worked by hand at block size 16: P's 100 tokens are blocks 1 and 2 (of 64; the last one
    short). A (200 tokens: 1, 2, 3, 4) hits P's 6 full cache blocks, 96 tokens; B (150: 1, 2,
    5) hits 8, 128 tokens — all of blocks 1 and 2, which A's prompt had whole — but not A's
    block 3; J (300, grown from B: 1, 2, 5, 6, 7) hits B's 9 cache blocks, 144 tokens."""
    sessions = read_otel(group(tmp_path)).sessions
    assert ideal_hits(sessions, 16) == (96 + 128 + 144, 100 + 200 + 150 + 300)
    blocks = Blocks(list(range(1000, 3000)))
    p, a, b, j = (blocks.prompt(sessions[0], k) for k in range(4))
    assert a[:100] == b[:100] == p and a[128:144] != b[128:144] and j[:150] == b


def test_replayed_on_the_mock_the_siblings_are_in_flight_at_once_and_the_join_waits_for_both(
        tmp_path, mock_server, qwen3_path):
    path = group(tmp_path, a=(1.0, 3.0), b=(1.01, 2.0), out=60)  # B sent 10 ms after A; J 1 s after A's end
    mock = mock_server(ttft_ms=30, itl_ms=5, keep_requests=True)  # a call of 60 tokens streams for ~0.3 s
    spec = BenchSpec(server=ServerSpec(base_url=mock.url, backend="vllm", model="mock"),
                     load=LoadSpec(num_warmups=0, ready_check_timeout_s=0),
                     dataset=DatasetSpec(name="otel", path=path, request_id_prefix="r-"),
                     output=OutputSpec(progress=False, telemetry=False), tokenizer=qwen3_path)
    kind = DRIVERS[spec.driver]
    tokenizer, work = _prepare(spec, kind, "mock")
    sink = RecordSink(Tally(kind.requests(work)))
    kind.run(Bench(spec, bench_config(spec, "mock"), work, tokenizer, Hooks()), sink)
    truth = mock.truth()
    p, a, b, j = ({r.request_id: r for r in truth.requests}[f"r-t1-{k}"] for k in range(4))
    # the mock's clock: A and B each arrived after P's last write, and B before A's last write
    # (serialised, B would wait for A's reply); the mock counted both open at once
    assert a.recv_ns > p.event_ns[-1] and b.recv_ns > p.event_ns[-1]
    assert b.recv_ns < a.event_ns[-1] and a.recv_ns < b.event_ns[-1] and max(truth.open_n) == 2
    assert j.recv_ns - max(a.event_ns[-1], b.event_ns[-1]) >= 1_000_000_000


@pytest.mark.parametrize("bad, message", [
    ({"spanId": "x"}, r"spans\[1\]\.traceId must be a non-empty string, not None$"),
    (dict(chat("c2", "", 2, 3, 1, 1), startTimeUnixNano="soon"),
     r"spans\[1\]\.startTimeUnixNano must be an integer of nanoseconds >= 0, not 'soon'$"),
    (chat("c2", "", 3, 2, 1, 1), r"spans\[1\]\.endTimeUnixNano is before its startTimeUnixNano"),
    (chat("c2", "", 2, 3, -4, 1), r"spans\[1\]\.attributes gen_ai\.usage\.input_tokens must be an integer >= 0, "
                                  r"not '-4'$"),
    (chat("c1", "", 2, 3, 1, 1), r"spans\[1\]\.spanId 'c1' appears twice in trace 't1'$"),
])
def test_bad_spans_stop_with_one_line_naming_the_file_line_and_field(tmp_path, bad, message):
    path = write(tmp_path, [span("r", "", None, 0, 9)], [chat("c1", "", 0, 1, 1, 1), bad])
    with pytest.raises(DatasetError, match=r"spans\.jsonl:2: resourceSpans\[0\]\.scopeSpans\[0\]\." + message):
        read_otel(path)


def test_a_line_that_is_not_json_and_a_file_of_no_model_call_are_one_line(tmp_path):
    path = tmp_path / "spans.jsonl"
    path.write_text('{"resourceSpans": []}\n{"resourceSpans": [\n')
    with pytest.raises(DatasetError, match=r"spans\.jsonl:2: not JSON"):
        read_otel(str(path))
    tools = write(tmp_path, [span("t", "", "execute_tool", 0, 1)])
    with pytest.raises(DatasetError, match=r"no model call \(no span has gen_ai\.operation\.name one of chat, "
                                           r"text_completion, generate_content\)$"):
        read_otel(tools)


def test_the_otel_dataset_reads_through_read_sessions_and_weka_points_an_otel_file_there():
    sessions, about = read_sessions(DatasetSpec(name="otel", path=str(EXAMPLE), trace_scale=0.5))
    assert about["trace_format"] == "otel" and about["scaled"] and sessions[0].block_size == 32
    assert isinstance(sessions[0].calls[0], Call)
    with pytest.raises(DatasetError, match=r"an OpenTelemetry span export \(resourceSpans\), not a WEKA trace: use "
                                           r"--dataset-name otel$"):
        read_sessions(DatasetSpec(name="weka", path=str(EXAMPLE)))
    with pytest.raises(DatasetError, match=r"--dataset-path is required for --dataset-name otel \(an OTLP JSON"):
        read_sessions(DatasetSpec(name="otel"))
