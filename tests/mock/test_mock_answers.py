"""The mock's answers per prompt (mock/answers.py): greedy and repeatable, a stated share
corrupted, sampling unless temperature is ignored, and an answer key for task scores."""

from __future__ import annotations

import json
import urllib.request

import pytest

from servelab.errors import InputError
from servelab.mock.config import MockConfig
from servelab.mock.dialect import WORDS


def ask(url: str, prompt: str, stream: bool = False, **body) -> str:
    data = json.dumps({"model": "mock", "prompt": prompt, "max_tokens": 12, "stream": stream, **body}).encode()
    req = urllib.request.Request(url + "/v1/completions", data, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as resp:
        raw = resp.read().decode()
    if not stream:
        return json.loads(raw)["choices"][0]["text"]
    events = [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: {")]
    return "".join(e["choices"][0]["text"] for e in events if e["choices"])


PROMPTS = [f"question {i}" for i in range(40)]


def test_the_same_prompt_gets_the_same_answer_and_prompts_differ(mock_server):
    a, b = mock_server(answers="prompt"), mock_server(answers="prompt")
    first = [ask(a.url, p) for p in PROMPTS]
    assert first == [ask(b.url, p, stream=True) for p in PROMPTS]  # another server, streamed: same words
    assert len(set(first)) == len(PROMPTS)
    assert all(len(t.split()) == 12 and set(" " + w for w in t.split()) <= set(WORDS) for t in first)


def test_a_stated_share_is_corrupted_from_the_token_the_truth_names(mock_server):
    clean, lossy = mock_server(answers="prompt"), mock_server(answers="prompt", corrupt_rate=0.25)
    ref = [ask(clean.url, p) for p in PROMPTS]
    got = [ask(lossy.url, p) for p in PROMPTS]
    truth = lossy.truth().requests
    corrupted = [r.corrupted_at for r in truth]
    assert 0 < sum(c is not None for c in corrupted) < len(PROMPTS)
    for r, g, at in zip(ref, got, corrupted):
        words_r, words_g = r.split(), g.split()
        if at is None:
            assert g == r
        else:  # identical before ``at``, different at every token from there
            assert words_g[:at] == words_r[:at] and all(x != y for x, y in zip(words_g[at:], words_r[at:]))
    assert [r.answer for r in truth] == got
    again = mock_server(answers="prompt", corrupt_rate=0.25)  # the same prompts, the same corruption
    assert [ask(again.url, p) for p in PROMPTS] == got


def test_sampling_varies_unless_temperature_is_ignored_or_seeded(mock_server):
    mock = mock_server(answers="prompt")
    greedy = ask(mock.url, "hello")
    sampled = {ask(mock.url, "hello", temperature=0.8) for _ in range(5)}
    assert len(sampled) == 5 and greedy not in sampled
    assert ask(mock.url, "hello", temperature=0.8, seed=7) == ask(mock.url, "hello", temperature=0.8, seed=7)
    deaf = mock_server(answers="prompt", ignore_temperature=True)
    assert {ask(deaf.url, "hello", temperature=0.8) for _ in range(3)} == {greedy}


def test_an_answer_key_answers_the_prompts_it_holds_then_stops(mock_server, tmp_path):
    key = tmp_path / "key.json"
    key.write_text(json.dumps({"What is 2 + 3?": "5", "Name a colour.": "deep blue"}))
    mock = mock_server(answers="prompt", answer_key=str(key))
    assert ask(mock.url, "What is 2 + 3?") == " 5"
    assert ask(mock.url, "<|user|>Name a colour.<|end|>", stream=True) == " deep blue"  # inside a template
    assert [r.finish_reason for r in mock.truth().requests] == ["stop", "stop"]
    assert len(ask(mock.url, "unknown").split()) == 12


@pytest.mark.parametrize("fields, says", [
    ({"corrupt_rate": 0.2}, "need --answers prompt"),
    ({"answers": "prompt", "corrupt_rate": 1.5}, "--corrupt-rate must be in [0, 1]"),
    ({"answers": "nonsense"}, "--answers: choose from cycle, prompt"),
])
def test_bad_answer_settings_are_one_line(fields, says):
    with pytest.raises(InputError, match=says.replace("[", r"\[").replace("]", r"\]")):
        MockConfig(**fields)
