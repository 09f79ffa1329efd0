"""quality/tasks.py and graders.py: the built-in set, a user's file, and one line for bad input."""

from __future__ import annotations

import json

import pytest

from servelab.errors import InputError
from servelab.quality import graders
from servelab.quality.tasks import BUILTIN_ITEMS, builtin, load


def test_the_builtin_set_is_seeded_distinct_and_its_replies_are_right():
    items = builtin(0)
    assert len(items) == BUILTIN_ITEMS >= 300 and len({i.prompt for i in items}) == len(items)
    assert [i.prompt for i in items] == [i.prompt for i in load("builtin")]
    assert [i.prompt for i in builtin(1)] != [i.prompt for i in items]
    assert all(i.right(i.reply) for i in items)  # the key's replies pass
    assert all(i.right(f"The answer is: {i.reply}") for i in items if i.kind == "regex")  # wordy is fine
    assert not any(i.right("I do not know.") for i in items)


@pytest.mark.parametrize("kind, expected, text, right", [
    ("answer", "Paris", "  Paris\n", True), ("answer", "Paris", "Paris.", False),
    ("regex", r"\b42\b", "it is 42 today", True), ("regex", r"\b42\b", "420", False),
    ("choices", ["yes"], "Yes, it is.", True), ("choices", ["yes"], "No, yes", False),
    ("json_schema", {"type": "object", "required": ["a"]}, 'Sure: ```json\n{"a": 1}\n```', True),
    ("json_schema", {"type": "object", "required": ["a"]}, '{"b": 1}', False),
    ("json_schema", {"type": "object"}, "no json here", False),
])
def test_each_grader(kind, expected, text, right):
    assert graders.grade(kind, expected, text) is right


def write(tmp_path, *rows):
    path = tmp_path / "q.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return str(path)


def test_a_users_file_with_prompts_and_messages(tmp_path):
    path = write(tmp_path, {"prompt": "2+3?", "answer": "5"},
                 {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}],
                  "choices": ["hello", "hi"], "id": "x"})
    a, b = load(path)
    assert (a.prompt, a.kind, b.prompt, b.kind) == ("2+3?", "answer", "Hi?", "choices")
    assert b.right("Hello there") and len(b.messages) == 2


@pytest.mark.parametrize("row, says", [
    ({"prompt": "x", "answer": "y", "colour": "red"}, "q.jsonl:2: unknown field 'colour'"),
    ({"prompt": "x"}, "q.jsonl:2: missing field: one of answer, regex, json_schema, choices"),
    ({"prompt": "x", "answer": "y", "regex": "y"}, "q.jsonl:2: more than one of"),
    ({"answer": "y"}, "q.jsonl:2: missing field: 'prompt'"),
    ({"prompt": "x", "regex": "(("}, "q.jsonl:2: field 'regex' is not a valid regular expression"),
    ({"prompt": "x", "choices": []}, "q.jsonl:2: field 'choices' must be a non-empty list of strings"),
    ({"prompt": "x", "json_schema": {"type": 5}}, "q.jsonl:2: json_schema: not a valid schema"),
    ("{not json", "q.jsonl:2: not JSON"),
])
def test_bad_lines_are_one_line_naming_line_and_field(tmp_path, row, says):
    path = write(tmp_path, {"prompt": "ok", "answer": "ok"}, row)
    with pytest.raises(InputError) as err:
        load(path)
    assert says in str(err.value) and "\n" not in str(err.value)
