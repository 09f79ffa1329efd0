"""The local fleet (scale/local.py): runs released together, one start instant for all; a run
that dies mid-way ends them all; and Ray stays out of a local scale run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest

from servelab.errors import ServerError
from servelab.flags.bench_serve import parse_bench_spec
from servelab.scale.local import Job, run_together


def jobs(tmp_path, ports: list[int], prompts: int) -> list[Job]:
    out = []
    for i, port in enumerate(ports):
        spec = parse_bench_spec(["--base-url", f"http://127.0.0.1:{port}", "--model", "mock", "--dataset-name",
                                 "random", "--random-input-len", "8", "--random-output-len", "8", "--num-prompts",
                                 str(prompts), "--max-concurrency", "2", "--no-telemetry", "--disable-tqdm"])
        out.append(Job(i, spec, {}, tmp_path / f"r{i}"))
    return out


def test_every_run_counts_from_one_start_instant(tmp_path, mock_server):
    servers = [mock_server(ttft_ms=5, itl_ms=2) for _ in range(2)]
    runs = run_together(jobs(tmp_path, [s.port for s in servers], 6))
    assert [r.replica for r in runs] == [0, 1]
    assert runs[0].t0_ns == runs[1].t0_ns  # the shared instant
    assert all(len(r.records) == 6 and r.exit_code == 0 for r in runs)
    assert all(rec.intended_ns >= r.t0_ns for r in runs for rec in r.records)
    assert (tmp_path / "r1" / "console.txt").read_text().count("Successful requests") == 1


@pytest.mark.timing  # the run ends within 25 s of wall time (loosened from 15 s on a loaded machine: c12099c)
def test_a_run_that_dies_mid_way_ends_the_others(tmp_path, mock_server):
    servers = [mock_server(ttft_ms=5, itl_ms=50) for _ in range(2)]  # 8 tokens: 0.4 s a request
    me = psutil.Process()
    killer = threading.Thread(target=kill_first_child_once_running, args=(me, servers[0]), daemon=True)
    killer.start()
    started = time.monotonic()
    with pytest.raises(ServerError, match=r"servelab-replica-0 \(pid \d+\) ended with code -9 during its run"):
        run_together(jobs(tmp_path, [s.port for s in servers], 200))
    assert time.monotonic() - started < 25  # replica 1 (40 s of work) was stopped, not waited for
    assert not spawned(me)


def kill_first_child_once_running(me: psutil.Process, server) -> None:
    """SIGKILL replica 0's process (the first spawned) once its mock has served a request."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not server.truth().requests:
        time.sleep(0.05)
    first = min(spawned(me), key=lambda c: c.create_time())
    os.kill(first.pid, signal.SIGKILL)


def spawned(me: psutil.Process) -> list[psutil.Process]:
    return [c for c in me.children() if "multiprocessing.spawn" in " ".join(c.cmdline())]


def test_a_local_scale_run_never_imports_ray():
    """Ray is optional: scale/run.py reaches scale/ray.py (and Ray) only for ``--ray``."""
    code = ("import sys, servelab.scale.run as r; from servelab.scale.local import LocalFleet; "
            "print('servelab.scale.ray' in sys.modules, 'ray' in sys.modules, LocalFleet().placement())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False", "{}"]
