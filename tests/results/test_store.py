"""Records streamed to their file as they complete, and vLLM's per-request lists from the tally."""

import json

from servelab.metrics.summary import itl_ns, summarize, tally_of
from servelab.metrics.tally import Tally
from servelab.records import RequestRecord
from servelab.results import store

MS = 1_000_000


def rec(rid, sent, tokens, error=None, text="hi"):
    return RequestRecord(
        request_id=rid, prompt_len=4, expected_output_len=3, intended_ns=sent - 2 * MS, dispatched_ns=sent - MS,
        sent_ns=sent, done_ns=(tokens[-1] if tokens else sent) + 1, token_ns=tuple(tokens),
        token_counts=(1,) * len(tokens), output_tokens=len(tokens), generated_text=text, error=error,
        http_status=500 if error else 200)


RECORDS = [rec("a", 10 * MS, [20 * MS, 25 * MS, 31 * MS]), rec("b", 12 * MS, [], error="HTTP 500"),
           rec("c", 11 * MS, [40 * MS, 41 * MS], text="yo")]


def test_records_are_written_as_they_come_then_named_after_the_run(tmp_path):
    sink = store.RecordSink(Tally(RECORDS, detailed=True), store.RecordsFile(tmp_path))
    t0 = 5 * MS
    sink.add(2, RECORDS[2], t0)
    sink.add(0, RECORDS[0], t0)
    sink.file.flush()
    (part,) = tmp_path.glob(".servelab-*.records.jsonl.part")
    assert [json.loads(x)["request_id"] for x in part.read_text().splitlines()] == ["c", "a"]  # as they came
    sink.add(1, RECORDS[1], t0)
    sink.file.close(tmp_path / "r.records.jsonl")
    lines = (tmp_path / "r.records.jsonl").read_text().splitlines()
    assert [json.loads(x) for x in lines] == [store.record_dict(RECORDS[i], t0) for i in (2, 0, 1)]
    assert sink.tally.records() == [RECORDS[0], RECORDS[1], RECORDS[2]] and not part.exists()
    assert (tmp_path / "r.records.jsonl").stat().st_mode & 0o777 == 0o644  # shared like the result, not 0600


def test_a_run_that_never_started_leaves_no_file(tmp_path):
    store.RecordsFile(tmp_path).discard()
    assert list(tmp_path.iterdir()) == []


def test_per_request_lists_are_vllms_definitions_in_the_runs_order():
    tally = Tally(RECORDS, detailed=True)
    for i in (2, 1, 0):
        tally.add(i, RECORDS[i])
    lists = store.per_request_lists(tally)
    ok = [r.success for r in RECORDS]
    assert lists == {
        "input_lens": [4, 4, 4], "output_lens": [3, 0, 2],
        "ttfts": [r.ttft_ns / 1e9 if k else 0.0 for r, k in zip(RECORDS, ok)],
        "itls": [[g / 1e9 for g in itl_ns(r)] if k else [] for r, k in zip(RECORDS, ok)],
        "latencies": [r.e2el_ns / 1e9 if k else 0.0 for r, k in zip(RECORDS, ok)],
        "start_times": [r.sent_ns / 1e9 for r in RECORDS], "queue_times": [0.001] * 3,
        "generated_texts": ["hi", "hi", "yo"], "errors": ["", "HTTP 500", ""]}


def test_only_the_kept_lists_are_built():
    tally = tally_of(RECORDS)
    args = dict(head={}, summary=summarize(RECORDS, 10**9), tally=tally, selected=["ttft"], extra={})
    plain = store.build_result(save_detailed=False, **args)
    detailed = store.build_result(save_detailed=True, **args)
    assert set(detailed) - set(plain) == set(store.DETAILED_KEYS)
    assert "latencies" in plain and "queue_times" in plain and "itls" not in plain
