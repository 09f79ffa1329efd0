"""The answers a run keeps, and reading them back.

With ``--save-detailed`` a result already holds ``generated_texts`` and ``errors`` in the
run's order (vLLM's keys). Pairing answers by position would pair the wrong prompts as soon
as two runs shuffle or oversample differently, so the result also keeps, per request, a
key: SHA-256 of the prompt's token ids (of its UTF-8 text when the run had no tokenizer —
``key_of`` says which), the prompt text (graders match task items by it) and how the run
sampled. Built after the run from the tally and the requests: nothing on the hot path.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from servelab.errors import InputError

SECTION = "responses"


def prompt_key(prompt, tokenizer) -> tuple[str, str]:
    """(key, key_of): the hash of the prompt's token ids, or of its text without a tokenizer."""
    if isinstance(prompt, tuple | list):
        return _hash(prompt), "token_ids"
    if tokenizer is not None:
        return _hash(tokenizer.encode(prompt)), "token_ids"
    return hashlib.sha256(prompt.encode()).hexdigest()[:24], "text"


def _hash(ids) -> str:
    return hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest()[:24]


def sampling_of(sampling: dict, extra_body: dict) -> dict:
    """How the run asked the server to sample: greedy only when temperature 0 was sent."""
    temperature = sampling.get("temperature")
    seed = extra_body.get("seed")
    return {"temperature": temperature, "seed": seed, "greedy": temperature == 0}


def section(requests, indices, tokenizer, simulated: bool, sampling: dict) -> dict:
    """``servelab.responses`` for the requests at ``indices`` (the run's order, as
    ``generated_texts``); ``simulated``: no server answered (quality is not judged).
    Text prompts are tokenized in one batch."""
    prompts = [requests[int(i)].prompt for i in indices]
    texts = [p for p in prompts if isinstance(p, str)]
    if tokenizer is not None and texts:
        ids = iter(tokenizer.encode_batch(texts))
        keys = [_hash(next(ids) if isinstance(p, str) else p) for p in prompts]
        key_of = "token_ids"
    else:
        keys, key_of = [], "token_ids"
        for p in prompts:
            key, key_of = prompt_key(p, None)
            keys.append(key)
    shown = [p if isinstance(p, str) else None for p in prompts]
    return {SECTION: {"keys": keys, "key_of": key_of, "prompts": shown, "sampling": sampling,
                      "simulated": simulated}}


@dataclass(frozen=True, slots=True)
class Responses:
    """One run's answers by prompt key (a key asked twice keeps its first answer)."""

    name: str
    texts: dict[str, str]  # key -> answer text, successful requests only
    asked: frozenset[str]  # every prompt key of the run, failed requests' too
    prompts: dict[str, str | None]
    failed: int
    sampling: dict
    inconsistent: int  # keys asked twice in the run whose answers differ

    @property
    def sampled(self) -> bool:
        return not self.sampling.get("greedy")

    @classmethod
    def of_result(cls, result: dict, name: str) -> Responses:
        """A result's kept answers; one line (InputError) when it has none."""
        kept = (result.get("servelab") or {}).get(SECTION)
        if kept is None or "generated_texts" not in result:
            raise InputError(f"{name}: no responses kept (run the bench with --save-detailed to keep them)")
        if kept.get("simulated"):
            raise InputError(f"{name}: quality not judged: a simulated run has no answers")
        texts = result["generated_texts"]
        errors = result.get("errors") or [""] * len(texts)
        out: dict[str, str] = {}
        prompts: dict[str, str | None] = {}
        failed = inconsistent = 0
        for key, prompt, text, error in zip(kept["keys"], kept["prompts"], texts, errors):
            if error:
                failed += 1  # a failed request is failed, never a wrong answer
                continue
            if key in out:
                inconsistent += out[key] != text
                continue
            out[key], prompts[key] = text, prompt
        if out and not any(out.values()):
            raise InputError(f"{name}: the server returned no text in any response (nothing to compare)")
        return cls(name, out, frozenset(kept["keys"]), prompts, failed, kept["sampling"], inconsistent)

    def warnings(self) -> list[str]:
        lines = []
        if self.inconsistent and not self.sampled:
            lines.append(f"{self.name}: {self.inconsistent} prompt(s) asked twice got different answers at "
                         f"temperature 0: the server may not honour greedy sampling or the seed")
        if self.sampling.get("temperature") is None:
            lines.append(f"{self.name}: no --temperature was sent, so the server sampled with its default "
                         f"(send --temperature 0 for greedy answers)")
        return lines
