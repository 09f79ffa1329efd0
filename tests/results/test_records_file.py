"""The records file survives what kills or starves servelab: a sidecar from the start,
whole lines on disk within the flush policy, a full disk cut back to the last whole line,
results written whole or not at all."""

import errno
import json
import os

import pytest
from disk_helpers import filling_disk

from servelab.errors import InputError, ServelabError
from servelab.metrics.tally import Tally
from servelab.records import RequestRecord
from servelab.results import records_file, store

MS = 1_000_000


def rec(i: int) -> RequestRecord:
    sent = (10 + i) * MS
    return RequestRecord(request_id=f"r{i}", prompt_len=4, expected_output_len=2, intended_ns=sent, dispatched_ns=sent,
                         sent_ns=sent, done_ns=sent + 3 * MS, token_ns=(sent + MS, sent + 2 * MS), token_counts=(1, 1),
                         output_tokens=2)


def part_lines(f: records_file.RecordsFile) -> list[dict]:
    return [json.loads(x) for x in f.tmp.read_text().splitlines()]


def test_the_sidecar_says_what_the_run_is_from_the_start_and_t0_from_the_first_record(tmp_path):
    f = records_file.RecordsFile(tmp_path, {"requests_meant": 7})
    side = json.loads(records_file.sidecar_of(f.tmp).read_text())
    assert side["requests_meant"] == 7 and side["pid"] == os.getpid() and "t0_perf_ns" not in side
    assert side["flush"]["records"] == records_file.FLUSH_RECORDS
    f.write(rec(0), 5 * MS)
    side = json.loads(records_file.sidecar_of(f.tmp).read_text())
    assert side["t0_perf_ns"] == 5 * MS and side["wall_start"] > 1e9
    f.close(tmp_path / "x.records.jsonl")
    assert not records_file.sidecar_of(f.tmp).exists() and (tmp_path / "x.records.jsonl").is_file()


def test_lines_reach_the_file_every_flush_records_without_waiting_for_the_end(tmp_path):
    f = records_file.RecordsFile(tmp_path)
    for i in range(records_file.FLUSH_RECORDS - 1):
        f.write(rec(i), 0)
    if not part_lines(f):  # under the count and (on a fast machine) under the time: still waiting
        f.write(rec(999), 0)
    assert len(part_lines(f)) >= records_file.FLUSH_RECORDS - 1
    f.discard()


def test_a_quiet_tail_is_written_by_the_tick_once_flush_s_has_passed(tmp_path):
    f = records_file.RecordsFile(tmp_path)
    f.write(rec(0), 0)
    f.write(rec(1), 0)
    f.last_flush -= records_file.FLUSH_S  # as if FLUSH_S had passed since
    assert f.tick() is None
    assert [x["request_id"] for x in part_lines(f)][-1] == "r1"
    f.discard()


def test_enospc_mid_run_keeps_whole_lines_only_and_says_so(tmp_path):
    f = records_file.RecordsFile(tmp_path, writer=filling_disk(1500))  # ~3 lines, then full
    for i in range(3):
        f.write(rec(i), 0)
    f.flush()  # ~1.4 KB: on disk
    for i in range(3, 10):
        f.write(rec(i), 0)
    f.flush()  # part of it fits, then the disk is full
    assert f.tick() is not None and f.failure.startswith("disk full")
    text = f.keep().read_text()
    assert text.endswith("\n") and [json.loads(x)["request_id"] for x in text.splitlines()] == ["r0", "r1", "r2"]


def test_a_folder_that_cannot_be_made_is_one_line_before_the_run(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(InputError, match="cannot create the results folder"):
        records_file.check_room(tmp_path / "file" / "runs", 10, 10)


def test_too_little_room_for_the_records_expected_is_one_line_before_the_run(tmp_path):
    with pytest.raises(InputError, match="not enough space"):
        records_file.check_room(tmp_path, 10**12, 1000)
    records_file.check_room(tmp_path, 10, 10)  # a small run fits


def test_a_result_is_written_whole_by_rename(tmp_path):
    path = tmp_path / "r.json"
    store.write_result({"a": float("inf")}, path, append=False)
    assert json.loads(path.read_text()) == {"a": None} and [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_a_failed_append_gives_the_file_its_old_length_back(tmp_path):
    path = tmp_path / "r.json"
    store.write_result({"run": 1}, path, append=True)
    before = path.read_bytes()

    def half_then_full(fd, data):
        if len(data) > 5:
            return os.write(fd, bytes(data[:5]))
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(ServelabError, match="back to its old length"):
        store.write_result({"run": 2, "pad": "x" * 100}, path, append=True, writer=half_then_full)
    assert path.read_bytes() == before and json.loads(before) == {"run": 1}


def test_the_sink_ticks_its_file():
    sink = records_file.RecordSink(Tally([rec(0)]))
    assert sink.tick() is None


def test_a_result_with_long_lists_is_written_as_one_dumps_would(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "_SLICE", 3)  # slices that cut through the lists, one list exactly 2 slices
    result = {"date": "x", "latencies": [0.5, float("nan"), 1e-7, 2.0, float("inf"), 3.25, 4.0],
              "start_times": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "short": [1.0, float("-inf")], "empty": [],
              "servelab": {"nested": [1, 2, 3, 4, 5]}, "errors": ["a\"b", "", "c", "d"], 7: [[1], [], [2], [3]]}
    path = tmp_path / "r.json"
    store.write_result(result, path, append=False)
    assert path.read_text() == json.dumps(store.finite(result))
    assert json.loads(path.read_text())["latencies"][1] is None
