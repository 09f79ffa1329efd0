"""servelab/datasets/custom.py: JSONL prompts, output lengths, chat template, errors at file:line."""

from __future__ import annotations

import json

import pytest

from servelab.config import DatasetSpec
from servelab.datasets import custom, sample_requests
from servelab.errors import DatasetError

LINES = [
    {"prompt": "What is the capital of India?", "output_tokens": 10},
    {"prompt": "What is the capital of Iran?", "output_tokens": 1520},
    {"prompt": "What is the capital of China?", "output_tokens": 819},
]


def write_jsonl(tmp_path, rows, name="prompts.jsonl"):
    path = tmp_path / name
    path.write_text("".join(r if isinstance(r, str) else json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def spec(path, **fields):
    return DatasetSpec(**({"name": "custom", "path": str(path), "num_prompts": 3, "shuffle": False,
                           "skip_chat_template": True} | fields))


def test_output_tokens_are_read_when_custom_output_len_is_minus_one(tmp_path, qwen3):
    requests = sample_requests(spec(write_jsonl(tmp_path, LINES), custom_output_len=-1), qwen3).requests
    assert [(r.prompt, r.expected_output_len) for r in requests] == [(x["prompt"], x["output_tokens"]) for x in LINES]
    assert [r.prompt_len for r in requests] == [len(qwen3.encode(x["prompt"])) for x in LINES] == [7, 7, 7]
    assert [r.request_id for r in requests] == ["bench-0", "bench-1", "bench-2"]


def test_custom_output_len_overrides_the_file_as_in_vllm(tmp_path, qwen3):
    requests = sample_requests(spec(write_jsonl(tmp_path, LINES)), qwen3).requests
    assert {r.expected_output_len for r in requests} == {256}


def test_chat_template_wraps_each_prompt_and_is_counted(tmp_path, qwen3):
    requests = sample_requests(spec(write_jsonl(tmp_path, LINES), skip_chat_template=False), qwen3).requests
    first = requests[0]
    assert first.prompt == "<|im_start|>user\nWhat is the capital of India?<|im_end|>\n<|im_start|>assistant\n"
    assert first.prompt_len == len(qwen3.encode(first.prompt)) == 7 + 8  # 8 template tokens


def test_shuffle_is_seeded_and_num_prompts_zero_takes_all(tmp_path, qwen3):
    rows = [{"prompt": f"prompt number {i}"} for i in range(12)]
    path = write_jsonl(tmp_path, rows)
    first = sample_requests(spec(path, num_prompts=0, shuffle=True), qwen3).requests
    assert sorted(r.prompt for r in first) == sorted(r["prompt"] for r in rows)
    assert [r.prompt for r in first] != [r["prompt"] for r in rows]
    assert sample_requests(spec(path, num_prompts=0, shuffle=True), qwen3).requests == first
    other = sample_requests(spec(path, num_prompts=0, shuffle=True, seed=5), qwen3).requests
    assert [r.prompt for r in other] != [r.prompt for r in first]


def test_oversampled_to_num_prompts(tmp_path, qwen3, capsys):
    requests = sample_requests(spec(write_jsonl(tmp_path, LINES), num_prompts=7), qwen3).requests
    assert len(requests) == 7 and len({r.request_id for r in requests}) == 7
    assert {r.prompt for r in requests[3:]} <= {x["prompt"] for x in LINES}
    assert "only 3 of 7 requests available; oversampled with replacement to 7" in capsys.readouterr().err


def test_blank_lines_are_skipped_and_errors_name_the_line(tmp_path, qwen3):
    path = write_jsonl(tmp_path, [LINES[0], "\n", {"text": "no prompt here"}])
    with pytest.raises(DatasetError) as err:
        sample_requests(spec(path), qwen3).requests
    assert str(err.value) == (f"{path}:3: each line must be an object with a string field 'prompt' "
                              "(or a list 'messages' of {\"role\", \"content\"} objects)")


def test_malformed_line_names_line_and_column(tmp_path, qwen3):
    path = write_jsonl(tmp_path, [LINES[0], '{"prompt": "x" "output_tokens": 3}\n'])
    with pytest.raises(DatasetError, match=f"^{path}:2:16: invalid JSON: Expecting ',' delimiter$"):
        sample_requests(spec(path), qwen3).requests


@pytest.mark.parametrize("bad", [None, "12", 0, True, 2.5])
def test_missing_or_bad_output_tokens_with_minus_one(tmp_path, qwen3, bad):
    row = {"prompt": "hi"} if bad is None else {"prompt": "hi", "output_tokens": bad}
    path = write_jsonl(tmp_path, [LINES[0], row])
    with pytest.raises(DatasetError, match=f"^{path}:2: field 'output_tokens' must be a positive integer"):
        sample_requests(spec(path, custom_output_len=-1), qwen3).requests


def test_empty_file_and_missing_path(tmp_path, qwen3):
    path = write_jsonl(tmp_path, ["\n"])
    with pytest.raises(DatasetError, match=f"^custom {path}: no requests"):
        sample_requests(spec(path), qwen3).requests
    with pytest.raises(DatasetError, match="--dataset-path is required for --dataset-name custom"):
        sample_requests(DatasetSpec(name="custom"), qwen3).requests


TALK = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "What is the capital of India?"}]


def test_a_messages_line_is_the_whole_conversation_in_the_chat_template(tmp_path, qwen3):
    path = write_jsonl(tmp_path, [{"messages": TALK}, LINES[1]])
    first, second = sample_requests(spec(path, num_prompts=2, skip_chat_template=False), qwen3).requests
    assert first.prompt == ("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
                            "<|im_start|>user\nWhat is the capital of India?<|im_end|>\n<|im_start|>assistant\n")
    assert first.prompt_len == len(qwen3.encode(first.prompt))
    assert second.prompt == qwen3.apply_chat_template(LINES[1]["prompt"])
    assert custom.conversations(spec(path, skip_chat_template=False), qwen3, "chat") == {first.prompt: TALK}
    assert custom.conversations(spec(path, skip_chat_template=False), qwen3, "completions") == {}


def test_a_messages_line_without_the_template_is_for_a_chat_endpoint_only(tmp_path, qwen3):
    path = write_jsonl(tmp_path, [{"messages": TALK}])
    (request,) = sample_requests(spec(path, num_prompts=1), qwen3).requests
    assert request.prompt == "user: Hi\nassistant: Hello!\nuser: What is the capital of India?"
    assert custom.conversations(spec(path), qwen3, "chat") == {request.prompt: TALK}
    with pytest.raises(DatasetError, match="drop --skip-chat-template"):
        custom.conversations(spec(path), qwen3, "completions")


@pytest.mark.parametrize("messages", [[], "Hi", [{"role": "user"}], [{"role": "user", "content": 3}]])
def test_a_bad_messages_field_names_the_line(tmp_path, qwen3, messages):
    path = write_jsonl(tmp_path, [LINES[0], {"messages": messages}])
    with pytest.raises(DatasetError) as err:
        sample_requests(spec(path), qwen3).requests
    assert str(err.value).startswith(f"{path}:2: field 'messages' must be a non-empty list")
