"""A quality item given as ``messages`` is sent as its whole conversation: to a chat endpoint as
the message list, to a completions endpoint rendered by the tokenizer's chat template; a
``prompt`` item stays a prompt. The mock keeps what it received (its truth), and answers from
its key by the last user turn, so the grades say each item reached it as one request."""

from __future__ import annotations

import json

import pytest

from servelab.cli.main import main
from servelab.config import TokenizerSpec
from servelab.datasets import load_tokenizer

TALK = [{"role": "system", "content": "Answer in one word."}, {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "Paris."}, {"role": "user", "content": "And of Italy?"}]
ITEMS = [{"messages": TALK, "answer": "Rome", "reply": "Rome"},
         {"prompt": "What is 2 + 3?", "answer": "5", "reply": "5"}]


@pytest.fixture
def mock(mock_server, tmp_path):
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(i) + "\n" for i in ITEMS))
    (tmp_path / "key.json").write_text(json.dumps({"And of Italy?": "Rome", "What is 2 + 3?": "5"}))
    return mock_server(answers="prompt", answer_key=str(tmp_path / "key.json"), keep_requests=True)


def bench(mock, tok, tmp_path, backend: str, *extra) -> int:
    return main(["bench", "--backend", backend, "--base-url", mock.url, "--model", "mock", "--tokenizer", tok,
                 "--quality-tasks", str(tmp_path / "tasks.jsonl"), "--num-warmups", "0", "--disable-tqdm",
                 "--save-result", "--result-dir", str(tmp_path), "--result-filename", "r.json", *extra])


def task(tmp_path) -> dict:
    return json.loads((tmp_path / "r.json").read_text())["servelab"]["quality"]["task"]


def test_a_chat_endpoint_is_sent_the_whole_conversation(mock, qwen3_path, tmp_path):
    assert bench(mock, qwen3_path, tmp_path, "openai-chat") == 0
    sent = [b["messages"] for b in mock.truth().bodies("/v1/chat/completions")]
    assert len(sent) == 2 and TALK in sent  # the conversation as given, not its last turn
    prompt = next(m for m in sent if m != TALK)
    assert len(prompt) == 1 and "What is 2 + 3?" in prompt[0]["content"][0]["text"]  # a prompt item: a prompt
    assert (task(tmp_path)["right"], task(tmp_path)["items"]) == (2, 2)


def test_a_completions_endpoint_is_sent_the_conversation_in_the_chat_template(mock, qwen3_path, tmp_path):
    assert bench(mock, qwen3_path, tmp_path, "vllm") == 0
    sent = [b["prompt"] for b in mock.truth().bodies("/v1/completions")]
    tokenizer = load_tokenizer(TokenizerSpec(qwen3_path))
    assert tokenizer.apply_chat_template(TALK) in sent
    assert tokenizer.apply_chat_template("What is 2 + 3?") in sent and len(sent) == 2
    whole = tokenizer.apply_chat_template(TALK)
    assert [whole.index(m["content"]) for m in TALK] == sorted(whole.index(m["content"]) for m in TALK)
    assert (task(tmp_path)["right"], task(tmp_path)["items"]) == (2, 2)


def test_without_the_chat_template_a_completions_endpoint_cannot_take_a_conversation(mock, qwen3_path,
                                                                                    tmp_path, capsys):
    assert bench(mock, qwen3_path, tmp_path, "vllm", "--skip-chat-template") == 2
    err = capsys.readouterr().err
    assert "drop --skip-chat-template" in err and err.count("\n") == 1 and "Traceback" not in err
    assert mock.truth().bodies("/v1/completions") == []


def test_without_the_chat_template_a_chat_endpoint_still_gets_the_conversation(mock, qwen3_path, tmp_path):
    assert bench(mock, qwen3_path, tmp_path, "openai-chat", "--skip-chat-template") == 0
    assert TALK in [b["messages"] for b in mock.truth().bodies("/v1/chat/completions")]
    assert task(tmp_path)["right"] == 2
