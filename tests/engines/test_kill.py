"""Kill servelab while its engine starts or runs: no process of the engine's group may survive.

The driver (kill_driver.py) is a real servelab process using start_engine; we
kill it with SIGINT (Ctrl-C), SIGTERM, an exception (SIGUSR1 raises in it), and
SIGKILL (no cleanup code runs at all: the watchdog and PDEATHSIG must do it).
"""

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from engine_helpers import group_pids
from net_helpers import port_open, wait_until

DRIVER = Path(__file__).resolve().parent / "kill_driver.py"
SIGNALS = {"sigint": signal.SIGINT, "sigterm": signal.SIGTERM, "exception": signal.SIGUSR1,
           "sigkill": signal.SIGKILL}


def start_driver(tmp_path, port, ready_after):
    ready_file = tmp_path / "ready"
    driver = subprocess.Popen([sys.executable, str(DRIVER), str(port), str(tmp_path), str(ready_file),
                               "--ready-after", ready_after], stderr=subprocess.PIPE, text=True)
    return driver, ready_file


def engine_pgid(tmp_path, wait_for: Path) -> int:
    assert wait_until(wait_for.exists, 20), "the engine never got that far"
    return int((tmp_path / "engine.pid").read_text())


@pytest.mark.parametrize("phase", ["starting", "ready"])
@pytest.mark.parametrize("how", list(SIGNALS))
def test_killing_servelab_leaves_no_engine_process(tmp_path, port, how, phase):
    driver, ready_file = start_driver(tmp_path, port, ready_after="60" if phase == "starting" else "0")
    try:
        pgid = engine_pgid(tmp_path, tmp_path / "engine.pid" if phase == "starting" else ready_file)
        assert wait_until(lambda: len(group_pids(pgid)) == 2, 5)  # server + grandchild are up
        driver.send_signal(SIGNALS[how])
        code = driver.wait(timeout=30)
        # With cleanup code (all but SIGKILL) the group is gone by the time servelab exits;
        # after SIGKILL the watchdog needs a moment.
        settle_s = 15 if how == "sigkill" else 0
        assert wait_until(lambda: group_pids(pgid) == [], settle_s), f"survivors: {group_pids(pgid)}"
        assert wait_until(lambda: not port_open(port), settle_s + 1)
        assert code != 0
        if how == "exception":
            assert "RuntimeError: injected failure" in driver.stderr.read()
    finally:
        if driver.poll() is None:
            driver.kill()


BENCH_DRIVER = Path(__file__).resolve().parent / "bench_kill_driver.py"


@pytest.mark.parametrize("how", ["sigint", "sigterm", "exception", "sigkill"])
def test_killing_servelab_mid_bench_leaves_no_engine_process(tmp_path, port, how, qwen3_path):
    bench_file = tmp_path / "bench-started"
    argv = [sys.executable, str(BENCH_DRIVER), str(port), str(tmp_path), str(bench_file), "--tokenizer", qwen3_path]
    if how == "exception":
        argv += ["--raise-at", "30"]  # 20 req/s: ~1.5 s into the bench
    driver = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(bench_file.exists, 30), "the bench never started"
        pgid = int(bench_file.read_text())
        assert group_pids(pgid)  # the engine is serving the bench
        if how != "exception":
            driver.send_signal(SIGNALS[how])
        out, err = driver.communicate(timeout=60)
        settle_s = 15 if how == "sigkill" else 0
        assert wait_until(lambda: group_pids(pgid) == [], settle_s), f"survivors: {group_pids(pgid)}"
        assert wait_until(lambda: not port_open(port), settle_s + 1)
        assert driver.returncode != 0 or how in ("sigint", "sigterm")
        if how == "exception":
            assert "RuntimeError: injected failure mid-bench" in err
        if how in ("sigint", "sigterm"):  # the bench stopped cleanly and still printed its result
            assert "Serving Benchmark Result" in out and "interrupted" in out
    finally:
        if driver.poll() is None:
            driver.kill()
