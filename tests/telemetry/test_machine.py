"""How busy the machine was during a run, and with whose work: the arithmetic on
hand-built snapshots, then real spinning processes inside and outside servelab's tree."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import spinners

from servelab.telemetry import machine
from servelab.telemetry.machine import CpuSnapshot

def test_shares_are_fractions_of_wall_time_times_cpus():
    before, after = CpuSnapshot(10.0, 100.0, 5.0, 2), CpuSnapshot(12.0, 103.0, 6.0, 2)
    got = machine.share(before, after)
    assert got == pytest.approx({"cpus": 2, "seconds": 2.0, "busy_fraction": 0.75, "ours_fraction": 0.25,
                                 "others_fraction": 0.5})


def test_ours_never_exceeds_busy_and_counters_going_back_count_as_nothing():
    # a process tree's times can run ahead of the kernel's per-CPU counters by a tick
    got = machine.share(CpuSnapshot(0.0, 10.0, 0.0, 2), CpuSnapshot(1.0, 10.5, 0.9, 2))
    assert got["ours_fraction"] == got["busy_fraction"] == 0.25 and got["others_fraction"] == 0.0
    got = machine.share(CpuSnapshot(0.0, 10.0, 5.0, 2), CpuSnapshot(1.0, 9.0, 4.0, 2))
    assert got["busy_fraction"] == got["ours_fraction"] == got["others_fraction"] == 0.0


def test_a_warning_only_when_others_took_a_quarter_of_the_machine():
    calm = {"cpus": 2, "busy_fraction": 0.6, "ours_fraction": 0.4, "others_fraction": 0.2}
    assert machine.warning(calm) is None and machine.warning(None) is None and machine.warning({}) is None
    busy = {**calm, "others_fraction": 0.5}
    assert machine.warning(busy) == ("other programs kept 50% of the machine's 2 CPUs busy during this run "
                                     "(servelab and the engine: 40%); latency figures move with such a neighbour")


def measure(pid: int, engine_pids: tuple[int, ...] = ()) -> tuple[dict, float]:
    """The machine's shares over a window in which ``pid`` used at least ``ENOUGH`` CPU
    seconds (however long that takes on a loaded machine), and what it used in it."""
    spinner = psutil.Process(pid)
    before, start = machine.snapshot(engine_pids), sum(spinner.cpu_times()[:2])
    deadline = time.monotonic() + 60
    while (used := sum(spinner.cpu_times()[:2]) - start) < ENOUGH and time.monotonic() < deadline:
        time.sleep(0.1)
    return machine.share(before, machine.snapshot(engine_pids)), used


def core_seconds(got: dict, key: str) -> float:
    return got[key] * got["cpus"] * got["seconds"]


# The kernel counts in 10 ms ticks: "all of its time" is checked to 3 ticks.
TICKS = 0.03
ENOUGH = 0.3


def test_a_spinning_child_is_servelabs_and_a_spinning_stranger_is_not(monkeypatch, tmp_path):
    monkeypatch.delenv(machine.ROOT_ENV, raising=False)
    with spinners.child(tmp_path / "child") as pid:
        got, spun = measure(pid)
    assert spun >= ENOUGH and core_seconds(got, "ours_fraction") >= spun - TICKS, (got, spun)
    with spinners.strangers(tmp_path) as [pid]:
        got, spun = measure(pid)
    assert spun >= ENOUGH and core_seconds(got, "others_fraction") >= spun - TICKS, (got, spun)
    assert core_seconds(got, "ours_fraction") < 0.5 * spun, (got, spun)


MEASURE_IN_A_CHILD = """
import json, sys
sys.path[:0] = [sys.argv[2], sys.argv[2] + "/.."]  # test_machine, and the spinners beside tests/
from test_machine import measure
print(json.dumps(measure(int(sys.argv[1]))))
"""


@pytest.mark.parametrize("root_marked", [True, False])
def test_a_sibling_counts_as_servelabs_when_the_root_is_marked(monkeypatch, tmp_path, root_marked):
    """A replica's run is a spawned child; the engines beside it are its parent's. With the
    parent marked as root (``mark_root``, inherited), a spinning sibling is servelab's."""
    monkeypatch.setenv(machine.ROOT_ENV, "")  # recorded, so whatever mark_root sets is undone
    monkeypatch.delenv(machine.ROOT_ENV)
    if root_marked:
        machine.mark_root()
        assert os.environ[machine.ROOT_ENV] == str(os.getpid())
    with spinners.child(tmp_path / "sibling") as sibling:
        out = subprocess.run([sys.executable, "-c", MEASURE_IN_A_CHILD, str(sibling), str(Path(__file__).parent)],
                             capture_output=True, text=True, check=True, timeout=120).stdout
    got, spun = json.loads(out)
    mine, theirs = core_seconds(got, "ours_fraction"), core_seconds(got, "others_fraction")
    assert spun >= ENOUGH, (got, spun)
    if root_marked:
        assert mine >= spun - TICKS, (got, spun)
    else:
        assert theirs >= spun - TICKS and mine < 0.5 * spun, (got, spun)


def test_an_engine_started_by_hand_on_this_machine_counts_as_ours(tmp_path):
    """The usual case: `vllm serve` in one terminal, `servelab bench` in another. Its
    process listens on the port the bench talks to; it is the stack, not a neighbour."""
    with spinners.engine_by_hand(tmp_path) as (pid, port):
        assert machine.local_engine(f"http://127.0.0.1:{port}") == ((pid,), None)
        assert machine.local_engine(f"http://LOCALHOST:{port}/v1") == ((pid,), None)
        got, spun = measure(pid, (pid,))
    assert spun >= ENOUGH and core_seconds(got, "ours_fraction") >= spun - TICKS, (got, spun)


def test_an_engine_elsewhere_is_none_of_this_machine_and_one_not_seen_here_is_said():
    assert machine.local_engine("http://engine.example.invalid:8000") == ((), None)
    assert machine.local_engine("http://10.255.255.1:8000") == ((), None)  # no interface of ours
    # local, but nothing listening that servelab can see (a container behind a proxy would look alike)
    assert machine.local_engine(f"http://127.0.0.1:{unused_port()}") == ((), machine.UNSEEN)
    assert machine.local_engine("http://[::1:8000") == ((), machine.UNSEEN)  # not a URL: no claim either way


def test_the_warning_names_what_may_be_among_the_others():
    shared = {"cpus": 2, "busy_fraction": 0.9, "ours_fraction": 0.1, "others_fraction": 0.8,
              "unattributed": [machine.UNSEEN]}
    assert machine.warning(shared) == (
        "other programs kept 80% of the machine's 2 CPUs busy during this run (servelab and the engine: 10%); "
        "among them, perhaps, the engine's own processes (on this machine, but not seen: another user's, or a "
        "container's); latency figures move with such a neighbour")
    assert machine.warning({"others_fraction": None}) is None  # a hand-edited result: no crash


def unused_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
