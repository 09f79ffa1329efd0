"""``servelab bench --multi-turn`` against the mock, which records the messages it received:
each turn carries the earlier turns and the replies the server actually sent, after the
think time; records, TTFT by turn, failures and bad input."""

from __future__ import annotations

import json

import pytest

from servelab.cli.main import main
from servelab.mock.dialect import text_for

CONVERSATIONS = [
    {"id": "a", "turns": ["alpha one", "alpha two", "alpha three"]},
    {"id": "b", "turns": ["beta one", "beta two"]},
    {"turns": [{"prompt": "gamma one", "output_tokens": 3}]},
]


def run(mock, tok, tmp_path, *extra, conversations=CONVERSATIONS) -> dict:
    path = tmp_path / "conversations.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in conversations))
    rc = main(["bench", "--backend", "openai-chat", "--base-url", mock.url, "--model", "mock", "--tokenizer", tok,
               "--dataset-name", "custom", "--dataset-path", str(path), "--num-prompts", str(len(conversations)),
               "--disable-shuffle", "--custom-output-len", "6", "--multi-turn", "--disable-tqdm", "--save-result",
               "--result-dir", str(tmp_path), "--result-filename", "r.json", *extra])
    assert rc == 0
    result = json.loads((tmp_path / "r.json").read_text())
    result["records"] = [json.loads(x) for x in open(result["servelab"]["records_file"])]
    return result


def test_save_detailed_writes_each_turns_reply(mock_server, qwen3_path, tmp_path):
    mock = mock_server(ttft_ms=5, itl_ms=1)
    result = run(mock, qwen3_path, tmp_path, "--save-detailed")
    assert result["generated_texts"] == [text_for(0, 6)] * 6  # the replies the histories carried


def by_conversation(truth) -> dict[str, list]:
    """The mock's requests grouped by conversation, in turn order (ids are <conversation>-<turn>)."""
    groups: dict[str, list] = {}
    for r in sorted(truth.requests, key=lambda r: r.recv_ns):
        groups.setdefault(r.request_id.rsplit("-", 1)[0], []).append(r)
    return groups


def test_each_turn_carries_the_history_with_the_replies_the_server_sent(mock_server, qwen3_path, tmp_path):
    mock = mock_server(ttft_ms=5, itl_ms=1, record_messages=True)
    result = run(mock, qwen3_path, tmp_path)
    groups = by_conversation(mock.truth())
    assert sorted(len(g) for g in groups.values()) == [1, 2, 3]
    reply = text_for(0, 6)  # what the mock streams for 6 tokens: the history must hold exactly this
    for turns in groups.values():
        users = [t.messages[-1]["content"] for t in turns]
        for k, t in enumerate(turns):
            expected = [m for u in users[:k] for m in ({"role": "user", "content": u},
                                                       {"role": "assistant", "content": reply})]
            assert t.messages == expected + [{"role": "user", "content": users[k]}]
    assert [t.messages[-1]["content"] for t in groups[f"{_prefix(result)}0"]] == CONVERSATIONS[0]["turns"]
    section = result["servelab"]["multi_turn"]
    assert section["turns_sent"] == result["completed"] == 6 and section["abandoned_turns"] == 0
    # a turn's prompt tokens are the server's usage (the whole history), as the mock counted them
    truth = {r.request_id: r.prompt_tokens for r in mock.truth().requests}
    assert section["prompt_tokens_from"] == {"usage": 6}
    assert {r["request_id"]: r["prompt_len"] for r in result["records"]} == truth
    assert sorted(truth.values()) == [2, 2, 2, 10, 10, 18]  # 2 words, + 6-word reply + 2 words, ...
    assert [(r["turn"], r["requests"]) for r in section["ttft_by_turn"]] == [(0, 3), (1, 2), (2, 1)]
    assert sorted((r["conversation_id"][-1], r["turn"]) for r in result["records"]) == \
        [("0", 0), ("0", 1), ("0", 2), ("1", 0), ("1", 1), ("2", 0)]


@pytest.mark.timing  # each next turn under 0.3 s of wall time after a 0.2 s think time
def test_think_time_separates_a_reply_from_the_next_turn(mock_server, qwen3_path, tmp_path):
    mock = mock_server(ttft_ms=5, itl_ms=1)
    result = run(mock, qwen3_path, tmp_path, "--multi-turn-think-time", "0.2")
    for turns in by_conversation(mock.truth()).values():
        for before, after in zip(turns, turns[1:]):
            # the kernel's arrival stamp is converted to this clock, to within a fraction of a ms
            gap_s = (after.arrived_ns - before.end_ns) / 1e9
            assert 0.199 <= gap_s < 0.3
    records = {(r["conversation_id"], r["turn"]): r for r in result["records"]}
    for (cid, turn), r in records.items():
        if turn > 0:  # intended = the previous reply's end + the think time, to the rounding of the file
            assert r["intended_send_ms"] - records[(cid, turn - 1)]["done_ms"] == pytest.approx(200.0, abs=0.01)


def test_without_history_each_turn_is_sent_alone(mock_server, qwen3_path, tmp_path):
    mock = mock_server(record_messages=True)
    result = run(mock, qwen3_path, tmp_path, "--multi-turn-no-history")
    assert all(len(r.messages) == 1 and r.messages[0]["role"] == "user" for r in mock.truth().requests)
    assert result["servelab"]["multi_turn"]["history"] is False and result["completed"] == 6


def test_the_history_leaves_out_reasoning(mock_server, qwen3_path, tmp_path):
    mock = mock_server(reasoning_len=2, record_messages=True)
    run(mock, qwen3_path, tmp_path, "--multi-turn-max-turns", "2")
    second = [r for r in mock.truth().requests if len(r.messages) > 1]
    assert len(second) == 2 and all(r.messages[1]["content"] == text_for(2, 4) for r in second)


def test_a_failed_turn_ends_its_conversation_and_is_counted(mock_server, qwen3_path, tmp_path):
    mock = mock_server(error_rate=0.5, seed=1)
    result = run(mock, qwen3_path, tmp_path, "--max-concurrency", "1")
    section = result["servelab"]["multi_turn"]
    sent = len(mock.truth().requests)
    assert 0 < result["failed"] and section["turns_sent"] == sent
    assert sent + section["abandoned_turns"] == 6 and section["abandoned_turns"] > 0
    assert result["max_concurrent_requests"] == 1
    ending = result["servelab"]["ending"]  # the shared accounting: an abandoned turn was never sent
    assert (ending["never_sent"], ending["cut"], ending["reason"]) == (section["abandoned_turns"], 0, "completed")
    assert len(result["records"]) == ending["completed"] + ending["failed"] == sent


def test_each_turns_record_is_written_as_the_turn_ends(mock_server, qwen3_path, tmp_path, monkeypatch):
    """Not after the run: a kill mid-run keeps the turns that had ended (results recover)."""
    import time

    from servelab.results import records_file

    written: list[int] = []
    real = records_file.RecordsFile.write

    def write(self, r, t0_ns):
        written.append(time.perf_counter_ns())
        real(self, r, t0_ns)

    monkeypatch.setattr(records_file.RecordsFile, "write", write)
    mock = mock_server()
    run(mock, qwen3_path, tmp_path, "--max-concurrency", "1", "--multi-turn-think-time", "0.05")
    last_sent = max(r.recv_ns for r in mock.truth().requests)
    assert len(written) == 6 and written[0] < last_sent  # the first turn's record before the last turn went out


def test_sharegpt_conversations_turn_by_turn(mock_server, qwen3_path, tmp_path):
    sharegpt = tmp_path / "sg.json"
    talk = [{"from": "gpt", "value": "a reply cut from an earlier chat"},
            {"from": "human", "value": "first question, long enough"}, {"from": "gpt", "value": "first answer here"},
            {"from": "human", "value": "second question, long enough"}, {"from": "gpt", "value": "second answer"},
            {"from": "human", "value": "a third without its reply"}]
    sharegpt.write_text(json.dumps([{"id": "x", "conversations": talk},
                                    {"id": "single", "conversations": talk[1:3]}]))
    mock = mock_server(record_messages=True)
    rc = main(["bench", "--backend", "openai-chat", "--base-url", mock.url, "--model", "mock", "--tokenizer",
               qwen3_path, "--dataset-name", "sharegpt", "--dataset-path", str(sharegpt), "--num-prompts", "1",
               "--multi-turn", "--disable-tqdm"])
    assert rc == 0
    users = [r.messages[-1]["content"] for r in sorted(mock.truth().requests, key=lambda r: r.recv_ns)]
    assert users == ["first question, long enough", "second question, long enough"]


CUSTOM = ["--dataset-name", "custom", "--dataset-path", "x.jsonl"]


@pytest.mark.parametrize("extra, needle", [
    (["--backend", "vllm", *CUSTOM], "--backend openai-chat"),
    (["--backend", "openai-chat", "--dataset-name", "random"], "sharegpt or custom"),
    (["--backend", "openai-chat", "--workers", "2", *CUSTOM], "--workers"),
    (["--backend", "openai-chat", "--multi-turn-think-time", "-1", *CUSTOM], "--multi-turn-think-time"),
    (["--backend", "openai-chat", "--multi-turn-max-turns", "0", *CUSTOM], "--multi-turn-max-turns"),
    (["--backend", "openai-chat", "--lora-modules", "a", *CUSTOM], "--lora-modules"),
])
def test_bad_multi_turn_input_is_one_line_exit_2(extra, needle, qwen3_path, capsys):
    rc = main(["bench", "--base-url", "http://127.0.0.1:9", "--model", "m", "--tokenizer", qwen3_path,
               "--multi-turn", *extra])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and needle in err


def test_flags_are_checked_before_the_dataset_is_looked_for(qwen3_path, capsys):
    # sharegpt without --dataset-path finds the bundled copy and says so: not before a refusal
    rc = main(["bench", "--base-url", "http://127.0.0.1:9", "--model", "m", "--tokenizer", qwen3_path,
               "--multi-turn", "--dataset-name", "sharegpt"])
    err = capsys.readouterr().err
    assert rc == 2 and err == ("servelab: error: --multi-turn needs --backend openai-chat "
                               "(the history is sent as chat messages)\n")


def test_options_without_multi_turn_are_refused(qwen3_path, capsys):
    rc = main(["bench", "--base-url", "http://127.0.0.1:9", "--tokenizer", qwen3_path, "--multi-turn-no-history"])
    assert rc == 2 and "need --multi-turn" in capsys.readouterr().err


def test_a_line_without_turns_names_the_file_and_line(qwen3_path, tmp_path, capsys):
    path = tmp_path / "c.jsonl"
    path.write_text('{"turns": ["ok"]}\n{"prompt": "not a conversation"}\n')
    rc = main(["bench", "--backend", "openai-chat", "--base-url", "http://127.0.0.1:9", "--model", "m",
               "--tokenizer", qwen3_path, "--dataset-name", "custom", "--dataset-path", str(path), "--multi-turn"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and f"{path}:2" in err and "'turns'" in err


def _prefix(result: dict) -> str:
    """The run's conversation id prefix (bench-<8 hex>-), read from a record."""
    return result["records"][0]["conversation_id"].rsplit("-", 1)[0] + "-"


def test_the_request_rate_paces_conversation_starts(mock_server, qwen3_path, tmp_path):
    from servelab.loadgen.arrivals import arrival_offsets_ns, arrival_rng

    mock = mock_server()
    result = run(mock, qwen3_path, tmp_path, "--request-rate", "20", "--seed", "5")
    firsts = sorted(r["intended_send_ms"] for r in result["records"] if r["turn"] == 0)
    offsets = arrival_offsets_ns(3, 20.0, 1.0, arrival_rng(5)) / 1e6  # vLLM's stream for the seed
    assert firsts == pytest.approx(list(offsets), abs=0.01)
    assert len(result["records"]) == 6


def test_the_console_says_which_rows_count_conversations_and_which_turns(mock_server, qwen3_path, tmp_path, capsys):
    """Issue 19 item 14: "Request rate configured (RPS): 1.00" (conversations) stood beside req/s (turns)."""
    mock = mock_server(ttft_ms=5, itl_ms=1)
    run(mock, qwen3_path, tmp_path, "--request-rate", "50")
    out = capsys.readouterr().out
    assert "Request rate configured (RPS):" in out  # vLLM's row stays as it is
    assert ("servelab: multi-turn: 3 conversations (50 conversations/s configured) → 6 turns completed; "
            "'Request rate configured' counts conversations, every request and req/s row turns") in out
