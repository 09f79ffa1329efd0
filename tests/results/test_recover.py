"""A run killed hard is recovered from what it wrote: every whole line, the result it
would have written, flagged, its missing requests counted by records.RunEnding's rule."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from servelab.cli.main import main
from servelab.results import records_file, recover

MS = 1_000_000
DEAD_PID = 2**22 + 12345  # beyond pid_max's default: no process has it


def killed_run(folder: Path, lines: list[str], meant: int = 5) -> Path:
    """A part and sidecar as a run killed mid-write leaves them (its pid gone)."""
    part = folder / ".servelab-x.records.jsonl.part"
    part.write_text("".join(lines))
    header = {"servelab_records": 1, "pid": DEAD_PID, "requests_meant": meant, "wall_start": 1.7e9,
              "t0_perf_ns": 0, "servelab_version": "t", "argv": [], "saved": True, "append": False,
              "head": {"date": "", "backend": "vllm", "model_id": "m", "num_prompts": meant},
              "result_file": {"label": None, "backend": "vllm", "request_rate": "inf", "max_concurrency": None,
                              "model_id": "m", "result_filename": "r.json", "ramp": None},
              "percentile_metrics": ["ttft", "tpot", "itl"], "metric_percentiles": [99.0], "goodput": {}}
    records_file.sidecar_of(part).write_text(json.dumps(header))
    return part


def line(i: int, error: str | None = None) -> str:
    return json.dumps({"request_id": f"r{i}", "prompt_len": 4, "expected_output_len": 2, "intended_send_ms": i,
                       "dispatched_ms": i, "sent_ms": i, "done_ms": i + 3.0,
                       "token_ms": [] if error else [i + 1, i + 2],
                       "token_counts": [] if error else [1, 1], "output_tokens": 0 if error else 2,
                       "error": error, "http_status": 500 if error else 200, "finished": True}) + "\n"


def test_a_cut_tail_is_dropped_and_the_rest_becomes_a_flagged_result(tmp_path):
    part = killed_run(tmp_path, [line(0), line(1, "HTTP 500"), line(2), line(3)[:25]])
    assert recover.orphans_under(tmp_path) == [part]
    (path,) = recover.recover(tmp_path, say=lambda s: None)
    result = json.loads(path.read_text())
    ending = result["servelab"]["ending"]
    assert result["servelab"]["recovered"] is True and (result["completed"], result["failed"]) == (2, 1)
    assert ending == {"reason": "killed (recovered)", "early": True, "meant": 5, "completed": 2, "failed": 1,
                      "cut": 2, "never_sent": None}
    records = Path(result["servelab"]["records_file"]).read_text().splitlines()
    assert len(records) == ending["completed"] + ending["failed"]  # the file and the result agree
    assert not part.exists() and not records_file.sidecar_of(part).exists()
    assert result["total_output_tokens"] == 4 and result["mean_ttft_ms"] == 1.0


def test_a_running_runs_part_is_not_touched(tmp_path):
    part = killed_run(tmp_path, [line(0)])
    side = records_file.sidecar_of(part)
    side.write_text(json.dumps({**json.loads(side.read_text()), "pid": os.getpid()}))
    assert recover.orphans_under(tmp_path) == []
    assert recover.recover(tmp_path, say=lambda s: None) == [] and part.exists()


def test_the_next_run_in_the_folder_offers_it_in_one_line(tmp_path, capsys):
    from servelab.measure.sink import offer_recovery

    killed_run(tmp_path, [line(0)])
    offer_recovery(tmp_path)
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and f"servelab results recover {tmp_path}" in out[0]


def test_results_recover_on_a_missing_folder_is_one_line(tmp_path, capsys):
    assert main(["results", "recover", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err.strip().endswith("is not a folder")


def test_a_sigkilled_bench_of_20000_requests_is_recovered_within_the_flush_interval(mock_server, qwen3_path,
                                                                                   tmp_path, capsys):
    mock = mock_server(output_len=4)
    cmd = [sys.executable, "-m", "servelab.cli.main", "bench", "--backend", "vllm", "--base-url", mock.url,
           "--model", "mock", "--tokenizer", qwen3_path, "--dataset-name", "random", "--random-input-len", "8",
           "--random-output-len", "4", "--num-prompts", "20000", "--request-rate", "100", "--max-concurrency", "32",
           "--disable-tqdm", "--no-telemetry", "--save-result", "--result-dir", str(tmp_path)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ.copy())
    try:
        killed_ns = _kill_midway(proc, tmp_path)
    finally:
        proc.kill()
        proc.wait()
    truth = [r for r in mock.truth().requests if r.finish is not None and r.end_ns is not None]
    assert 0 < len(truth) < 20000, "the kill came mid-run"
    (path,) = recover.recover(tmp_path, say=lambda s: None)
    result = json.loads(path.read_text())
    records = Path(result["servelab"]["records_file"]).read_text().splitlines()
    recovered = {json.loads(x)["request_id"] for x in records}
    missing = [r for r in truth if r.request_id not in recovered]
    # the stated policy: made ≤ FLUSH_S after the response ended, on disk ≤ FLUSH_S later
    # (+ 0.5 s for a busy two-core machine's scheduling)
    bound_ns = int((2 * records_file.FLUSH_S + 0.5) * 1e9)
    assert all(killed_ns - r.end_ns <= bound_ns for r in missing), (
        f"{len(missing)} lost beyond the flush interval of {len(truth)}; {len(recovered)} recovered; "
        f"{[r.request_id for r in missing[:3]]} {sorted(recovered)[:3]} {[(killed_ns - r.end_ns) / 1e9 for r in missing[:5]]}")
    assert result["servelab"]["recovered"] and result["completed"] + result["failed"] == len(recovered)
    ending = result["servelab"]["ending"]
    assert ending["meant"] == 20000
    # the sidecar's count of requests sent: what the mock never received was never sent (the
    # count may take for sent at most the 32 a sender had begun but not yet written)
    assert ending["never_sent"] is not None and ending["never_sent"] >= 20000 - len(mock.truth().requests) - 32


def _kill_midway(proc: subprocess.Popen, folder: Path) -> int:
    """SIGKILL once a few thousand records are on disk; the kill's instant (perf_counter_ns)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        parts = list(folder.glob(".servelab-*.records.jsonl.part"))
        if parts and parts[0].stat().st_size > 1000 * 400:
            os.kill(proc.pid, signal.SIGKILL)
            return time.perf_counter_ns()
        time.sleep(0.05)
    raise AssertionError("the bench never wrote its records (or ended before the kill)")


def test_requests_the_run_had_not_sent_by_its_last_count_are_never_sent_not_cut(tmp_path):
    """A run of 100 killed with 3 records and 5 sent by its sidecar's last count (2 in flight):
    2 cut, 95 never sent — not 97 cut."""
    part = killed_run(tmp_path, [line(0), line(1, "HTTP 500"), line(2)], meant=100)
    side = records_file.sidecar_of(part)
    side.write_text(json.dumps({**json.loads(side.read_text()), "sent": 5}))
    said = []
    (path,) = recover.recover(tmp_path, say=said.append)
    ending = json.loads(path.read_text())["servelab"]["ending"]
    assert (ending["completed"], ending["failed"], ending["cut"], ending["never_sent"]) == (2, 1, 2, 95)
    assert "(2 sent without a record, 95 never sent by the run's last count" in said[0]


def test_a_recycled_lanes_run_meant_only_what_it_had_sent(tmp_path):
    """A locked run with recycled lanes draws sessions ahead (100 requests) and takes them until its
    minimum: killed with 3 records and 5 sent, it meant those 5 — 2 cut, none never sent."""
    part = killed_run(tmp_path, [line(0), line(1, "HTTP 500"), line(2)], meant=100)
    side = records_file.sidecar_of(part)
    side.write_text(json.dumps({**json.loads(side.read_text()), "sent": 5, "requests_drawn_ahead": True}))
    (path,) = recover.recover(tmp_path, say=lambda _: None)
    ending = json.loads(path.read_text())["servelab"]["ending"]
    assert (ending["meant"], ending["completed"], ending["failed"], ending["cut"], ending["never_sent"]) == \
        (5, 2, 1, 2, 0)


def test_the_sidecar_counts_what_the_run_sent(tmp_path, monkeypatch):
    """The records file's tick writes the run's count of requests sent to the sidecar (at most
    every FLUSH_S, on the file's own clock, here a fake one)."""
    now = [100.0]
    monkeypatch.setattr(records_file.time, "monotonic", lambda: now[0])
    f = records_file.RecordsFile(tmp_path, {"requests_meant": 10})
    side = lambda: json.loads(records_file.sidecar_of(f.tmp).read_text())  # noqa: E731
    f.tick(sent=3)
    assert "sent" not in side()  # not yet FLUSH_S since the sidecar was written
    now[0] += records_file.FLUSH_S
    f.tick(sent=3)
    assert side()["sent"] == 3
    f.discard()


def test_a_run_killed_before_any_record_leaves_nothing_behind_once_told(tmp_path, capsys):
    """Killed before its first record was flushed: nothing to recover, and its part, sidecar and
    hidden scrape file are removed — before, they stayed, and every later run offered the same
    empty recovery."""
    part = killed_run(tmp_path, [])
    side = records_file.sidecar_of(part)
    scrape = tmp_path / ".servelab-abc.scrape.jsonl"
    scrape.write_text('{"src": "meta", "t_ns": 1}\n')
    side.write_text(json.dumps({**json.loads(side.read_text()), "telemetry": {"scrape_file": scrape.name,
                                                                             "interval_s": 0.25}}))
    kept = tmp_path / "r.json"
    kept.write_text("{}")
    assert main(["results", "recover", str(tmp_path)]) == 1  # nothing recovered fails a script, as before
    out = capsys.readouterr().out
    assert "nothing to recover (removed what it left: .servelab-x.records.jsonl.part, " in out
    assert scrape.name in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
    assert recover.orphans_under(tmp_path) == []
