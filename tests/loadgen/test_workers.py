"""``--workers N`` (loadgen/workers.py) against the mock: real processes, a real server."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import signal
import threading
import time

import psutil
import pytest

from servelab.loadgen.hooks import Hooks
from servelab.config import BenchSpec, DatasetSpec, LoadSpec, OutputSpec, ServerSpec
from servelab.loadgen.drive import schedule
from servelab.loadgen.values import BenchConfig
from servelab.loadgen.workers import run_workers
from servelab.metrics.tally import Tally
from servelab.records import SampleRequest
from servelab.measure.run import execute
from servelab.results.store import RecordSink


def spec_for(url: str, tmp_path, tokenizer: str, workers: int) -> BenchSpec:
    return BenchSpec(
        server=ServerSpec(base_url=url),
        load=LoadSpec(request_rate=400.0, max_concurrency=5, workers=workers),
        dataset=DatasetSpec(name="random", num_prompts=30, random_input_len=16, random_output_len=6, seed=5),
        output=OutputSpec(save_result=True, result_dir=str(tmp_path), result_filename=f"w{workers}.json",
                          progress=False, telemetry=False),
        tokenizer=tokenizer)


def block_rows(out: str) -> list[str]:
    """The console block's row labels (the numbers differ run to run, the rows must not)."""
    block = out[out.index("Serving Benchmark Result"):]
    block = block[: block.index("=" * 50)]
    return [line.split(":")[0] for line in block.splitlines()]


def keys(result: dict) -> tuple[set, set]:
    return set(result), set(result["servelab"]) - {"workers"}


def test_two_workers_give_the_same_block_and_keys_as_one(mock_server, qwen3_path, tmp_path, capsys):
    mock = mock_server(ttft_ms=2, itl_ms=1)
    one = execute(spec_for(mock.url, tmp_path, qwen3_path, 1))
    out_one = capsys.readouterr().out
    mock.reset_truth()
    two = execute(spec_for(mock.url, tmp_path, qwen3_path, 2))
    out_two = capsys.readouterr().out
    assert two.exit_code == 0 and two.summary.completed == 30
    assert block_rows(out_two) == block_rows(out_one) and len(block_rows(out_one)) > 10
    assert keys(two.result) == keys(one.result)
    saved = json.loads((tmp_path / "w2.json").read_text())
    workers = saved["servelab"]["workers"]
    assert workers["count"] == 2 and workers["max_concurrency_shares"] == [3, 2]
    assert [w["requests"] for w in workers["per_worker"]] == [15, 15]
    assert all(w["cpu_s"] > 0 and "p99" in w["schedule_lag_ms"] for w in workers["per_worker"])
    # the server saw exactly the run's requests, once each
    assert sorted(r.request_id for r in mock.truth().requests) == sorted(r.request_id for r in two.tally.records())


def bench_config(url: str, rate: float, cap: int | None) -> BenchConfig:
    return BenchConfig(base_url=url, endpoint="/v1/completions", kind="completions", model="mock",
                       load=LoadSpec(request_rate=rate, burstiness=0.7, max_concurrency=cap), seed=11)


def samples(n: int, out_len: int = 6) -> list[SampleRequest]:
    return [SampleRequest(f"hello {i}", 2, out_len, f"req-{i}") for i in range(n)]


def test_merged_records_are_the_shards_and_follow_the_one_schedule(mock_server):
    mock = mock_server(ttft_ms=1, itl_ms=1)
    config = bench_config(mock.url, 300.0, None)
    reqs = samples(41)
    sink = RecordSink(Tally(reqs))
    got = run_workers(config, reqs, None, 2, sink=sink)
    records = sink.tally.records()
    # every record each worker made came back, once: the merge is their union
    assert [s.made for s in got.shards] == [w["records"] for w in got.section["per_worker"]] == [21, 20]
    assert sorted(r.request_id for r in records) == sorted(s.request_id for s in reqs)
    assert len(records) == 41 and all(r.success for r in records)
    # every request went out at t0 + the offset one worker would have drawn for it
    offsets = schedule(config, reqs)
    by_id = {r.request_id: r.intended_ns - got.run.outcome.t0_ns for r in records}
    assert [by_id[s.request_id] for s in reqs] == [int(o) for o in offsets]
    assert {s.t0_ns for s in got.shards} == {got.run.outcome.t0_ns}  # one start instant


def peak_in_flight(records) -> int:
    """Sweep-line over [sent, done)."""
    events = sorted([(r.sent_ns, 1) for r in records] + [(r.done_ns, -1) for r in records],
                    key=lambda e: (e[0], e[1]))
    peak = now = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


def test_global_concurrency_never_exceeds_the_cap(mock_server):
    mock = mock_server(ttft_ms=5, itl_ms=3)
    reqs = samples(40, 8)
    sink = RecordSink(Tally(reqs))
    run_workers(bench_config(mock.url, float("inf"), 5), reqs, None, 2, sink=sink)
    records = sink.tally.records()
    assert len(records) == 40
    assert peak_in_flight(records) == 5  # reached, never passed
    shard_ids = [{s.request_id for s in reqs[k::2]} for k in range(2)]
    assert [peak_in_flight([r for r in records if r.request_id in ids]) for ids in shard_ids] == [3, 2]


def kill_worker_after(index: int, delay_s: float) -> threading.Thread:
    def kill() -> None:
        time.sleep(delay_s)
        victim = next(p for p in multiprocessing.active_children() if p.name == f"servelab-worker-{index}")
        os.kill(victim.pid, signal.SIGKILL)

    thread = threading.Thread(target=kill, daemon=True)
    return thread


def test_a_worker_killed_mid_run_ends_the_run_and_keeps_every_record_it_had_returned(mock_server, tmp_path):
    """SIGKILL to a worker 2 s in: it returned its records in batches while it ran, so those are
    in the counts and the records file; it took only its un-sent tail with it; no orphan."""
    from servelab.results.store import RecordsFile

    mock = mock_server(ttft_ms=5, itl_ms=20)
    killer = kill_worker_after(1, 2.0)
    reqs = samples(60, 10)
    sink = RecordSink(Tally(reqs), RecordsFile(tmp_path))
    got = run_workers(bench_config(mock.url, 10.0, None), reqs, None, 2,
                      Hooks(on_start=lambda counters: killer.start()), sink=sink)
    killer.join()
    sink.file.close(tmp_path / "kill.records.jsonl")
    dead = got.section["per_worker"][1]
    kept = sink.tally.records()
    from_dead = [r for r in kept if int(r.request_id.split("-")[1]) % 2 == 1]
    assert dead["failed"] == "killed by SIGKILL" and dead["records"] == len(from_dead) > 0
    assert dead["lost_requests"] == 30 - len(from_dead) > 0
    assert got.failed == [f"worker 1 (pid {dead['pid']}) died (killed by SIGKILL) mid-run: "
                          f"{30 - len(from_dead)} of its 30 requests are lost ({len(from_dead)} returned before are kept)"]
    lines = [json.loads(x) for x in (tmp_path / "kill.records.jsonl").read_text().splitlines()]
    assert sorted(x["request_id"] for x in lines) == sorted(r.request_id for r in kept)  # written once each
    assert all(r.success for r in from_dead)
    assert got.run.outcome.interrupted and len(kept) < 60  # the run ended early, not at its schedule's end
    assert not multiprocessing.active_children()
    pids = [w["pid"] for w in got.section["per_worker"]]
    assert not [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]


def test_bad_worker_counts_are_one_line_errors():
    import pytest

    from servelab.errors import InputError
    from servelab.spec_checks import check_spec

    for load, text in ((LoadSpec(workers=0), "at least 1"), (LoadSpec(workers=4, max_concurrency=3), "more than")):
        with pytest.raises(InputError, match=text):
            check_spec(dataclasses.replace(BenchSpec(), load=load))


def test_the_cli_runs_two_workers_from_its_real_entry_point(mock_server, qwen3_path, tmp_path):
    """'spawn' re-imports the parent's main module in each worker: the CLI's must allow it."""
    import subprocess
    import sys

    mock = mock_server(ttft_ms=1, itl_ms=1)
    argv = [sys.executable, "-m", "servelab.cli.main", "bench", "--base-url", mock.url, "--tokenizer", qwen3_path,
            "--dataset-name", "random", "--num-prompts", "12", "--random-input-len", "8",
            "--random-output-len", "4", "--workers", "2", "--max-concurrency", "3", "--no-telemetry",
            "--save-result", "--result-dir", str(tmp_path), "--result-filename", "cli.json"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "2 client workers, one schedule dealt round-robin; max concurrency split [2, 1]" in done.stdout
    assert json.loads((tmp_path / "cli.json").read_text())["completed"] == 12


def test_telemetry_sees_the_workers_summed_counters(mock_server, qwen3_path, tmp_path):
    """The client samples (progress, timeline, diagnosis) read the workers' counters, summed:
    in flight reaches the cap split between two workers, never more."""
    mock = mock_server(ttft_ms=20, itl_ms=30)
    spec = spec_for(mock.url, tmp_path, qwen3_path, 2)
    spec = dataclasses.replace(spec, load=dataclasses.replace(spec.load, request_rate=float("inf")),
                               output=dataclasses.replace(spec.output, telemetry=True, telemetry_interval_s=0.05))
    outcome = execute(spec)
    client = outcome.result["servelab"]["telemetry"]["client"]
    assert client["in_flight"]["max"] == 5
    assert client["cpu"]["max"] > 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_stops_every_worker_and_keeps_what_completed(sig, mock_server, qwen3_path, tmp_path):
    """SIGINT to servelab (as a terminal's Ctrl-C): every worker stops, the completed records are
    written, exit 130, and no worker is left behind."""
    import subprocess
    import sys

    mock = mock_server(ttft_ms=5, itl_ms=50)
    argv = [sys.executable, "-m", "servelab.cli.main", "bench", "--base-url", mock.url, "--tokenizer", qwen3_path,
            "--dataset-name", "random", "--num-prompts", "60", "--random-input-len", "8",
            "--random-output-len", "10", "--request-rate", "20", "--workers", "2", "--no-telemetry",
            "--save-result", "--result-dir", str(tmp_path), "--result-filename", "int.json"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while len(mock.truth().requests) < 10 and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, out  # Ctrl-C 130, SIGTERM 143
    result = json.loads((tmp_path / "int.json").read_text())
    assert result["servelab"]["interrupted"] and 0 < result["completed"] < 60
    assert all(w["failed"] is None and w["interrupted"] for w in result["servelab"]["workers"]["per_worker"])
    pids = [w["pid"] for w in result["servelab"]["workers"]["per_worker"]]
    assert not [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]


def test_ray_without_ray_installed_is_a_one_line_error():
    import importlib.util

    import pytest

    from servelab.errors import InputError
    from servelab.spec_checks import check_spec
    from servelab.loadgen.ray_shards import run_ray

    with pytest.raises(InputError, match="--ray cannot be used with --workers"):
        check_spec(dataclasses.replace(BenchSpec(), load=LoadSpec(workers=2, ray="auto")))
    if importlib.util.find_spec("ray") is not None:
        pytest.skip("ray is installed here")
    with pytest.raises(InputError, match=r"pip install 'servelab\[ray\]'"):
        run_ray(bench_config("http://127.0.0.1:9", 1.0, None), samples(2), None, "auto", sink=RecordSink(Tally([])))


def test_a_worker_that_fails_before_the_start_calls_the_run_off_in_one_line():
    """Worker 0's ready check fails: nobody starts, every worker ends, the error names the worker."""
    import socket

    import pytest

    from servelab.errors import ServerError

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    config = dataclasses.replace(bench_config(url, 10.0, None), load=LoadSpec(ready_check_timeout_s=1))
    with pytest.raises(ServerError, match=r"^worker 0: .* not ready after 1 s"):
        run_workers(config, samples(4), None, 2, sink=RecordSink(Tally(samples(4))))
    assert not multiprocessing.active_children()
