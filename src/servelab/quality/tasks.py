"""Prompts that carry a check: a user's JSONL, or the built-in set made from seeded templates.

A line of a quality file::

    {"prompt": "What is 2 + 3?", "answer": "5"}
    {"messages": [{"role": "user", "content": "..."}], "regex": "\\\\bParis\\\\b"}
    {"prompt": "...", "json_schema": {"type": "object", ...}}
    {"prompt": "Yes or no: ...", "choices": ["yes"]}

``prompt`` or ``messages``, and exactly one of ``answer``, ``regex``, ``json_schema``,
``choices`` (graders.py says how each is checked); optional: ``id``, ``reply`` (a right
answer, which the mock can be keyed with) and ``output_tokens``. A missing or unknown field
is one line naming the file, the line and the field.

The built-in set (``builtin``): short questions with programmatic answers — one-digit and
two-digit sums, the larger of two numbers, capitals, the next letter, legs of an animal,
opposites, repeating and upper-casing a word, a one-key JSON object — drawn by a seeded
generator, so ``builtin(seed)`` is the same list everywhere. Graders are lenient where a
chat model is wordy (a regex for the number or the word, the first word for a choice), so a
small instruct model gets some right and misses others; the aim is a score between 20 %
and 80 % for a 135M model (measured on the mock here, not yet on the model: see the note).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from servelab.errors import InputError
from servelab.quality.graders import KINDS, check_expected, grade

BUILTIN = "builtin"
BUILTIN_ITEMS = 320
_OPTIONAL = ("id", "reply", "output_tokens")


@dataclass(frozen=True, slots=True)
class Item:
    prompt: str  # the text answers are matched by: the prompt, or a conversation's last user turn
    kind: str  # one of graders.KINDS
    expected: object
    reply: str | None = None  # a right answer (keys the mock)
    messages: tuple | None = None  # a conversation, sent whole (quality/workload.py)

    def right(self, text: str) -> bool:
        return grade(self.kind, self.expected, text)

    def line(self) -> dict:
        """The item as a quality file's line."""
        said = {"prompt": self.prompt} if self.messages is None else {"messages": list(self.messages)}
        d = {**said, self.kind: self.expected}
        return d if self.reply is None else {**d, "reply": self.reply}


def load(source: str, seed: int = 0) -> list[Item]:
    """``builtin`` or a JSONL file's items."""
    if source == BUILTIN:
        return builtin(seed)
    path = Path(source)
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise InputError(f"--quality-tasks {source}: cannot read it ({exc.strerror or exc})") from None
    items = [parse(json_line(text, f"{source}:{n}"), f"{source}:{n}")
             for n, text in enumerate(lines, 1) if text.strip()]
    if not items:
        raise InputError(f"--quality-tasks {source}: no items")
    return items


def json_line(text: str, where: str):
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InputError(f"{where}: not JSON ({exc})") from None


def parse(row, where: str) -> Item:
    if not isinstance(row, dict):
        raise InputError(f"{where}: each line must be a JSON object")
    unknown = sorted(set(row) - {"prompt", "messages", *KINDS, *_OPTIONAL})
    if unknown:
        raise InputError(f"{where}: unknown field '{unknown[0]}' (known: prompt or messages, one of "
                         f"{', '.join(KINDS)}, and optional {', '.join(_OPTIONAL)})")
    kinds = [k for k in KINDS if k in row]
    if len(kinds) != 1:
        raise InputError(f"{where}: {'missing field: one of' if not kinds else 'more than one of'} "
                         f"{', '.join(KINDS)}")
    kind = kinds[0]
    check_expected(kind, row[kind], where)
    prompt, messages = prompt_of(row, where)
    reply = row.get("reply")
    return Item(prompt, kind, row[kind], reply if isinstance(reply, str) else None, messages)


def prompt_of(row: dict, where: str) -> tuple[str, tuple | None]:
    if isinstance(row.get("prompt"), str) and "messages" not in row:
        return row["prompt"], None
    messages = row.get("messages")
    ok = (isinstance(messages, list) and messages and all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
        for m in messages) and messages[-1]["role"] == "user")
    if "prompt" in row or not ok:
        raise InputError(f"{where}: missing field: 'prompt' (a string) or 'messages' "
                         f"(a list of {{role, content}} ending in a user turn)")
    return messages[-1]["content"], tuple(messages)


# ---- the built-in set -----------------------------------------------------------------

CAPITALS = (("France", "Paris"), ("Germany", "Berlin"), ("Italy", "Rome"), ("Spain", "Madrid"),
            ("Japan", "Tokyo"), ("China", "Beijing"), ("Russia", "Moscow"), ("Egypt", "Cairo"),
            ("Canada", "Ottawa"), ("Australia", "Canberra"), ("Brazil", "Brasilia"), ("India", "Delhi"),
            ("Greece", "Athens"), ("Portugal", "Lisbon"), ("Norway", "Oslo"), ("Sweden", "Stockholm"),
            ("Finland", "Helsinki"), ("Poland", "Warsaw"), ("Austria", "Vienna"), ("Ireland", "Dublin"),
            ("Kenya", "Nairobi"), ("Peru", "Lima"), ("Cuba", "Havana"), ("Turkey", "Ankara"),
            ("Thailand", "Bangkok"), ("Argentina", "Buenos Aires"), ("Mexico", "Mexico City"),
            ("Hungary", "Budapest"), ("Denmark", "Copenhagen"), ("Belgium", "Brussels"))
LEGS = (("dog", 4), ("cat", 4), ("spider", 8), ("bird", 2), ("horse", 4), ("ant", 6), ("chicken", 2),
        ("cow", 4), ("bee", 6), ("duck", 2), ("octopus", 8), ("snake", 0), ("fish", 0), ("human", 2))
OPPOSITES = (("hot", "cold"), ("big", "small"), ("up", "down"), ("fast", "slow"), ("day", "night"),
             ("happy", "sad"), ("open", "closed"), ("light", "dark"), ("old", "new"), ("wet", "dry"),
             ("hard", "soft"), ("early", "late"), ("full", "empty"), ("high", "low"), ("left", "right"),
             ("win", "lose"), ("rich", "poor"), ("strong", "weak"), ("long", "short"), ("true", "false"))
WORDS = ("apple", "river", "garden", "planet", "window", "silver", "forest", "pencil", "orange", "candle",
         "rocket", "bridge", "castle", "dragon", "guitar", "island", "jacket", "ladder", "mirror", "pepper",
         "rabbit", "saddle", "tunnel", "violin", "wallet", "yellow", "basket", "cookie", "doctor", "engine")
NAMES = ("Alice", "Bob", "Carol", "David", "Emma", "Frank", "Grace", "Henry", "Irene", "Jack", "Karen",
         "Liam", "Maria", "Noah", "Olivia", "Peter", "Quinn", "Rosa", "Sam", "Tina", "Uma", "Victor",
         "Wendy", "Xavier", "Yara", "Zoe")
_SCHEMA = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}


def _number(n: int) -> str:
    return rf"(?<![\d.]){n}(?![\d])"


def _sum1(rng) -> Item:
    a, b = (int(x) for x in rng.integers(1, 10, 2))
    return Item(f"What is {a} + {b}? Reply with the number only.", "regex", _number(a + b), str(a + b))


def _sum2(rng) -> Item:
    a, b = (int(x) for x in rng.integers(10, 50, 2))
    return Item(f"What is {a} + {b}? Reply with the number only.", "regex", _number(a + b), str(a + b))


def _larger(rng) -> Item:
    a, b = (int(x) for x in rng.choice(np.arange(1, 100), 2, replace=False))
    return Item(f"Which number is larger, {a} or {b}? Reply with the number only.", "choices", [str(max(a, b))],
                str(max(a, b)))


def _capital(rng) -> Item:
    country, city = CAPITALS[int(rng.integers(len(CAPITALS)))]
    return Item(f"What is the capital of {country}? Answer with the city name only.", "regex",
                rf"(?i)\b{city}\b", city)


def _next_letter(rng) -> Item:
    k = int(rng.integers(1, 24))
    x, y = chr(ord("A") + k), chr(ord("A") + k + 1)
    if y == "I":  # "I" is also a word: a wordy wrong answer would pass
        x, y = "I", "J"
    return Item(f"Which letter comes right after {x} in the English alphabet? Answer with the letter only.",
                "regex", rf"(?<![A-Za-z]){y}(?![A-Za-z])", y)


def _legs(rng) -> Item:
    animal, n = LEGS[int(rng.integers(len(LEGS)))]
    return Item(f"How many legs does a {animal} have? Reply with the number only.", "regex", _number(n), str(n))


def _opposite(rng) -> Item:
    word, opp = OPPOSITES[int(rng.integers(len(OPPOSITES)))]
    return Item(f"What is the opposite of '{word}'? Answer with one word.", "choices", [opp], opp)


def _repeat(rng) -> Item:
    word = WORDS[int(rng.integers(len(WORDS)))]
    return Item(f"Repeat this word once and say nothing else: {word}", "choices", [word], word)


def _upper(rng) -> Item:
    word = WORDS[int(rng.integers(len(WORDS)))]
    return Item(f"Write the word '{word}' in capital letters.", "regex", rf"\b{word.upper()}\b", word.upper())


def _json(rng) -> Item:
    name = NAMES[int(rng.integers(len(NAMES)))]
    schema = {**_SCHEMA, "properties": {"name": {"const": name}}}
    return Item(f'Reply with only a JSON object with one key "name" whose value is "{name}".', "json_schema",
                schema, json.dumps({"name": name}))


TEMPLATES = (_sum1, _sum2, _larger, _capital, _next_letter, _legs, _opposite, _repeat, _upper, _json)


def builtin(seed: int = 0, n: int = BUILTIN_ITEMS) -> list[Item]:
    """``n`` distinct items, the templates taken in turn, each drawn with ``seed``'s generator
    (a repeat of a prompt already drawn is drawn again: answers pair by prompt)."""
    rng = np.random.default_rng(seed)
    items: dict[str, Item] = {}
    tries = 0
    while len(items) < n:
        item = TEMPLATES[tries % len(TEMPLATES)](rng)
        items.setdefault(item.prompt, item)
        tries += 1
        if tries > 100 * n:
            raise InputError(f"the built-in set has fewer than {n} distinct items")
    return list(items.values())


def answer_key(items: list[Item]) -> dict[str, str]:
    """{prompt: a right reply} for the items that carry one (``servelab mock --answer-key``)."""
    return {i.prompt: i.reply for i in items if i.reply is not None}
