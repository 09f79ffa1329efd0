"""Requests as columns: the same requests back, whichever way they are read, in ~110 B each."""

from __future__ import annotations

import pickle

import numpy as np

from servelab.datasets.requests import Requests, from_bytes
from servelab.records import SampleRequest


def mixed() -> list[SampleRequest]:
    shared = "a prompt repeated by oversampling ✓"
    return [SampleRequest("first", 1, 8, "bench-ab-0"), SampleRequest(shared, 7, None, "bench-ab-1"),
            SampleRequest("", 0, 3, "bench-ab-2"), SampleRequest(shared, 7, 5, "bench-ab-3")]


def test_columns_give_back_every_request_exactly():
    given = mixed()
    got = Requests.of(given)
    assert list(got) == given and got == given and len(got) == 4
    assert got[1].expected_output_len is None and got[2].prompt == ""
    assert got.spans[1].tolist() == got.spans[3].tolist()  # the repeated prompt is stored once
    assert got.numbers.tolist() == [0, 1, 2, 3] and got.prefix == "bench-ab-"


def test_ids_that_are_not_numbered_are_kept_as_names():
    given = [SampleRequest("x", 1, 1, "r-7"), SampleRequest("y", 1, 1, "other-8"),
             SampleRequest("z", 1, 1, "r-007")]
    got = Requests.of(given)
    assert got.numbers is None and list(got) == given


def test_token_id_prompts_and_timestamps():
    given = [SampleRequest((5, 6, 7), 3, 2, "t0", 0.5), SampleRequest((8,), 1, 2, "t1"),
             SampleRequest((9, 10), 2, 2, "t2", 1.25)]
    got = Requests.of(given)
    assert got.ids_prompts and list(got) == given
    assert from_bytes(got.to_bytes()) == given


def test_bytes_slices_pickles_and_prefixes_read_the_same():
    given = mixed()
    got = Requests.of(given)
    back = from_bytes(got.to_bytes())
    assert back == given and isinstance(back.prompts, memoryview)  # views of the bytes read, no copy
    assert got[1::2] == given[1::2] and got[1:3] == given[1:3]
    assert pickle.loads(pickle.dumps(got[1::2])) == given[1::2]
    assert from_bytes(got[2:].to_bytes()) == given[2:]  # a view writes only its own prompts
    run = got.with_prefix("run-")
    assert [r.request_id for r in run] == ["run-bench-ab-0", "run-bench-ab-1", "run-bench-ab-2", "run-bench-ab-3"]
    assert [r.request_id for r in got] == [r.request_id for r in given]  # the original is unchanged


def test_a_cut_file_is_refused():
    body = Requests.of(mixed()).to_bytes()
    for cut in (body[:-1], body + b"x", b"no header"):
        try:
            from_bytes(cut)
        except ValueError:
            continue
        raise AssertionError(f"{len(cut)} bytes read as whole")


def test_a_request_costs_its_prompt_and_about_thirty_bytes():
    rng = np.random.default_rng(0)
    given = [SampleRequest("w" * int(rng.integers(60, 100)), 16, 32, f"bench-1234abcd-{i}") for i in range(10_000)]
    got = Requests.of(given)
    text = sum(len(r.prompt) for r in given)
    columns = sum(a.nbytes for a in (got.spans, got.prompt_len, got.output_len, got.numbers))
    assert len(got.prompts) == text and columns == 10_000 * 32
