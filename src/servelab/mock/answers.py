"""What the mock *says*, when a test needs its words to mean something (``--answers prompt``).

By default every response is the same cycle of ``WORDS`` (``dialect.text_for``): fast, and
all a timing test needs. A quality test needs more: the same prompt answered the same way
on every run (greedy decoding), a stated share of answers corrupted (a lossy dtype), sampling
that varies the answer unless the mock is told to ignore ``temperature``, and — for a task
score — the right answer to a question it was given the key of.

Per request, decided when it is parsed (never on the hot path of a plain mock):

* the prompt's key: SHA-256 of its JSON (``prompt`` or ``messages``); the answer's words
  are drawn from ``WORDS`` by a generator seeded with it, so they depend on the prompt only;
* with an answer key (``{"prompt text": "reply", ...}``, a JSON object), a prompt that is,
  or contains, one of its prompts is answered with that reply, word by word, then stops;
* sampled: ``temperature`` > 0 (and not ``ignore_temperature``) mixes the request's
  ``seed`` (or, without one, the request's arrival number) into the draw;
* corrupted: when ``u(key, corrupt_seed) < corrupt_rate``, every token from a position
  drawn from the same key (uniform over the answer) is replaced by another word. The same
  prompts are corrupted on every run with one ``corrupt_seed``; another seed moves the
  corruption, the way batch-dependent kernels move a divergence between runs.

The truth records ``corrupted_at`` (the first changed token, or None) per request.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from servelab.errors import InputError
from servelab.mock.dialect import WORDS

ANSWER_MODES = ("cycle", "prompt")


@dataclass(frozen=True, slots=True)
class Answer:
    tokens: tuple[str, ...]  # one string per token, each with its leading space
    corrupted_at: int | None
    keyed: bool  # the reply of the answer key: the response stops after it


def prompt_key(prompt: object) -> bytes:
    return hashlib.sha256(json.dumps(prompt, sort_keys=True, ensure_ascii=False).encode()).digest()


def unit(key: bytes, salt: str) -> float:
    """A uniform draw in [0, 1) fixed by ``key`` and ``salt``."""
    h = hashlib.sha256(key + salt.encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64


def load_key(path: str | None) -> dict[str, str]:
    if path is None:
        return {}
    try:
        key = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"--answer-key {path}: cannot read a JSON object ({exc})") from None
    if not isinstance(key, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in key.items()):
        raise InputError(f"--answer-key {path}: expected a JSON object of prompt → reply strings")
    return key


def prompt_text(prompt: object) -> str:
    """The text an answer key is matched against: the prompt, or the last user message."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and prompt and isinstance(prompt[-1], dict):
        content = prompt[-1].get("content")
        if isinstance(content, list):
            return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
        return content if isinstance(content, str) else ""
    return ""


def reply_tokens(reply: str) -> tuple[str, ...]:
    """A reply as one token per word, each with its leading space (as ``WORDS``)."""
    return tuple(" " + w for w in reply.split()) or (" ",)


def corrupt_token(token: str) -> str:
    """Another word than ``token``: the next of ``WORDS`` (a mock token stays one token)."""
    if token in WORDS:
        return WORDS[(WORDS.index(token) + 1) % len(WORDS)]
    return WORDS[0]


class Answerer:
    """Answers per prompt (config ``answers == "prompt"``)."""

    def __init__(self, corrupt_rate: float, corrupt_seed: int, ignore_temperature: bool,
                 answer_key: dict[str, str]) -> None:
        self.corrupt_rate, self.corrupt_seed = corrupt_rate, corrupt_seed
        self.ignore_temperature, self.key = ignore_temperature, answer_key
        self._arrivals = 0

    def answer(self, prompt: object, n_tokens: int, temperature: float | None, seed: object) -> Answer:
        key = prompt_key(prompt)
        self._arrivals += 1
        reply = self._keyed(prompt_text(prompt))
        tokens = reply_tokens(reply)[:n_tokens] if reply is not None else self._drawn(key, n_tokens)
        sampled = (temperature or 0) > 0 and not self.ignore_temperature
        if sampled:  # a sampled answer: another draw, repeatable only with the request's seed
            salt = f"seed={seed}" if isinstance(seed, int) else f"arrival={self._arrivals}"
            tokens = self._drawn(hashlib.sha256(key + salt.encode()).digest(), len(tokens))
        at = None
        if self.corrupt_rate > 0 and unit(key, f"corrupt:{self.corrupt_seed}") < self.corrupt_rate:
            at = int(unit(key, f"at:{self.corrupt_seed}") * len(tokens))
            tokens = tokens[:at] + tuple(corrupt_token(t) for t in tokens[at:])
        return Answer(tokens, at, reply is not None)

    def _keyed(self, text: str) -> str | None:
        if text in self.key:
            return self.key[text]
        found = [p for p in self.key if p and p in text]  # a prompt wrapped in a chat template
        return self.key[max(found, key=len)] if found else None

    @staticmethod
    def _drawn(key: bytes, n: int) -> tuple[str, ...]:
        h, out = key, []
        while len(out) < n:
            h = hashlib.sha256(h).digest()
            out.extend(WORDS[b % len(WORDS)] for b in h)
        return tuple(out[:n])
