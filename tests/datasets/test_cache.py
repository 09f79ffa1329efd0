"""servelab/datasets/cache.py: a repeated preparation is read back, and only when
the entry is whole and made for exactly these inputs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from servelab.config import DatasetSpec
from servelab.datasets import notes
from servelab.datasets import prepare_requests, sample_requests
from servelab.datasets.cache import cached


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("SERVELAB_CACHE_DIR", str(folder))
    return folder


def counting(calls):
    def sample(spec, tokenizer):
        calls.append(spec)
        return sample_requests(spec, tokenizer)
    return sample


def sharegpt_spec(path, **fields):
    return DatasetSpec(**({"name": "sharegpt", "path": str(path), "num_prompts": 6, "seed": 3} | fields))


@pytest.fixture
def dataset(make_sharegpt):
    pairs = [(f"question number {i} about the weather today", f"answer {i} is sunny and warm") for i in range(10)]
    return make_sharegpt(pairs)


def entries(cache):
    return sorted((cache / "prepared").glob("*.bin"))


def test_a_repeat_is_read_back_not_sampled_again(cache, dataset, qwen3):
    calls = []
    first = cached(sharegpt_spec(dataset), qwen3, counting(calls)).requests
    again = cached(sharegpt_spec(dataset), qwen3, counting(calls)).requests
    assert len(calls) == 1 and again == first and len(entries(cache)) == 1


def test_request_ids_take_each_runs_prefix(cache, dataset, qwen3):
    a = prepare_requests(sharegpt_spec(dataset, request_id_prefix="a-"), qwen3).requests
    b = prepare_requests(sharegpt_spec(dataset, request_id_prefix="b-"), qwen3).requests
    assert [r.request_id for r in a] == [f"a-{i}" for i in range(6)]
    assert [r.request_id for r in b] == [f"b-{i}" for i in range(6)]
    assert [r.prompt for r in a] == [r.prompt for r in b] and len(entries(cache)) == 1


def test_changed_inputs_make_a_new_key(cache, dataset, qwen3, make_sharegpt):
    calls = []
    cached(sharegpt_spec(dataset), qwen3, counting(calls))
    cached(sharegpt_spec(dataset, seed=4), qwen3, counting(calls))  # a sampling flag
    make_sharegpt([("an entirely different question here", "and a different answer there")] * 10)  # same path
    changed = cached(sharegpt_spec(dataset), qwen3, counting(calls)).requests  # the file's content
    assert len(calls) == 3 and changed[0].prompt == "an entirely different question here"


def test_a_corrupted_entry_is_rebuilt(cache, dataset, qwen3, capsys):
    first = prepare_requests(sharegpt_spec(dataset), qwen3).requests
    [entry] = entries(cache)
    entry.write_bytes(entry.read_bytes()[:-40])  # cut off
    calls = []
    rebuilt = cached(sharegpt_spec(dataset), qwen3, counting(calls)).requests
    assert len(calls) == 1 and rebuilt == first
    assert "is not usable" in capsys.readouterr().err
    again = cached(sharegpt_spec(dataset), qwen3, counting(calls)).requests
    assert again == first and len(calls) == 1  # rewritten whole


def test_an_edited_payload_or_foreign_key_is_rebuilt(cache, dataset, qwen3, capsys):
    first = prepare_requests(sharegpt_spec(dataset), qwen3).requests
    [entry] = entries(cache)
    head, body = entry.read_bytes().split(b"\n", 1)
    tampered = body.replace(b"question number 1", b"question number 9")  # checksum no longer matches
    assert tampered != body
    entry.write_bytes(head + b"\n" + tampered)
    calls = []
    assert cached(sharegpt_spec(dataset), qwen3, counting(calls)).requests == first and len(calls) == 1
    head, body = entry.read_bytes().split(b"\n", 1)
    data = json.loads(head)
    data["key"] = data["key"].replace('"seed": 3', '"seed": 5')  # made for other inputs
    entry.write_bytes(json.dumps(data).encode() + b"\n" + body)
    assert cached(sharegpt_spec(dataset), qwen3, counting(calls)).requests == first and len(calls) == 2
    assert capsys.readouterr().err.count("is not usable") == 2


def test_the_arrival_stream_and_notes_come_back(cache, qwen3, capsys, dataset):
    spec = DatasetSpec(name="prefix_repetition", num_prompts=8, prefix_repetition_prefix_len=6,
                       prefix_repetition_suffix_len=4, prefix_repetition_num_prefixes=2)
    cold, warm = prepare_requests(spec, qwen3), prepare_requests(spec, qwen3)
    assert warm.requests == cold.requests
    assert warm.arrival_state[0] == cold.arrival_state[0] and warm.arrival_state[2:] == cold.arrival_state[2:]
    assert np.array_equal(warm.arrival_state[1], cold.arrival_state[1])
    capsys.readouterr()
    prepare_requests(sharegpt_spec(dataset, num_prompts=30), qwen3)  # topped up: a note
    cold_err = capsys.readouterr().err
    prepare_requests(sharegpt_spec(dataset, num_prompts=30), qwen3)
    assert "oversampled" in cold_err and capsys.readouterr().err == ""  # said once in a process
    notes._said.clear()  # as in a new process: the cache entry kept the note, and it is said again
    prepare_requests(sharegpt_spec(dataset, num_prompts=30), qwen3)
    assert capsys.readouterr().err == cold_err


def test_an_oversampled_entry_stores_each_prompt_once_and_shares_it_read_back(cache, dataset, qwen3):
    spec = sharegpt_spec(dataset, num_prompts=40)  # 10 conversations, topped up to 40 requests
    cold = prepare_requests(spec, qwen3).requests
    [entry] = entries(cache)
    distinct = {r.prompt for r in cold}
    text = "".join(distinct).encode()
    assert len(distinct) < 40 and entry.stat().st_size < len(text) + 40 * 64 + 2048  # each prompt once
    warm = prepare_requests(spec, qwen3).requests
    assert warm == cold
    assert len({tuple(span) for span in warm.spans.tolist()}) == len(distinct)  # one span per distinct prompt


def test_token_id_prompts_come_back_as_tuples(cache, qwen3):
    from servelab.datasets.cache import _decode, _encode
    from servelab.datasets.sample import Sample
    from servelab.records import SampleRequest

    sample = Sample.of([SampleRequest((5, 6, 7), 3, 4, "r0", 0.5), SampleRequest((8,), 1, None, "r1"),
                        SampleRequest((5, 6, 7), 3, 2, "r2", 1.0)])
    back, said = _decode(b"".join(_encode(sample, "a note\n")))
    assert back.requests == sample.requests and back.requests[0].prompt == (5, 6, 7) and said == "a note\n"


def test_off_writes_nothing(tmp_path, monkeypatch, dataset, qwen3):
    monkeypatch.setenv("SERVELAB_CACHE_DIR", "off")
    monkeypatch.setenv("HOME", str(tmp_path))
    calls = []
    cached(sharegpt_spec(dataset), qwen3, counting(calls))
    cached(sharegpt_spec(dataset), qwen3, counting(calls))
    assert len(calls) == 2 and not list(tmp_path.rglob("prepared"))


def test_a_changed_tokenizer_file_is_a_new_key(cache, tmp_path, qwen3, qwen3_path):
    import shutil

    from servelab.config import TokenizerSpec
    from servelab.datasets.tokenizer import load_tokenizer

    other = tmp_path / "tok"
    shutil.copytree(qwen3_path, other)
    config = json.loads((other / "tokenizer_config.json").read_text())
    config["chat_template"] = "USER: {{ messages[0]['content'] }}\nASSISTANT:"
    (other / "tokenizer_config.json").write_text(json.dumps(config))
    (other / "chat_template.jinja").unlink(missing_ok=True)
    lines = tmp_path / "c.jsonl"
    lines.write_text('{"prompt": "hello"}\n')
    spec = DatasetSpec(name="custom", path=str(lines), num_prompts=1)
    first = prepare_requests(spec, qwen3).requests
    again = prepare_requests(spec, load_tokenizer(TokenizerSpec(str(other)))).requests
    assert again[0].prompt == "USER: hello\nASSISTANT:" != first[0].prompt
