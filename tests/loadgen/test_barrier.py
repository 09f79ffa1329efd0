"""The start line (loadgen/barrier.py) on its own: real spawned processes and threads,
no server. Every party gets the one t0; a call-off starts nobody; a child that dies
before it is ready is named; no child outlives its parent or the run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from servelab.loadgen.barrier import (PROCESS_START_LEAD_NS, Aborted, Barrier, RayParty, reap, spawn,
                                      terminate)


# ---- what the spawned children run (module level: 'spawn' imports this file) ----------


def party(barrier: Barrier, k: int, conn) -> None:
    """Arrive, then report the t0 given and when the release woke it (or that it was called off)."""
    try:
        t0 = barrier.arrive(k)
    except Aborted:
        conn.send(("called off", None, None))
        return
    conn.send(("started", t0, time.perf_counter_ns()))


def dies_unready(conn) -> None:
    os._exit(3)


def ignores_sigterm(conn) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    conn.send("ignoring")
    time.sleep(60)


def sleeps(conn) -> None:
    time.sleep(60)


# ---- helpers ----------------------------------------------------------------------------


def parties(barrier: Barrier, n: int) -> list:
    return [spawn(f"test-party-{k}", party, barrier, k) for k in range(n)]


def until_ready(barrier: Barrier, children: list, within_s: float = 30.0) -> None:
    deadline = time.monotonic() + within_s
    while not barrier.all_ready():
        assert barrier.gone_before_ready([p for p, _ in children]) is None
        assert time.monotonic() < deadline, "the parties never said ready"
        time.sleep(0.01)


def answers(children: list) -> list:
    return [conn.recv() if conn.poll(10) else None for _, conn in children]


# ---- processes --------------------------------------------------------------------------


def test_every_party_is_released_at_the_one_t0():
    barrier = Barrier.for_processes(3)
    children = parties(barrier, 3)
    try:
        until_ready(barrier, children)
        time.sleep(0.05)
        assert not any(conn.poll() for _, conn in children)  # ready, and waiting: nobody started early
        released = time.perf_counter_ns()
        t0 = released + PROCESS_START_LEAD_NS
        barrier.release(t0)
        got = answers(children)
    finally:
        reap(children, 10)
    assert [g[:2] for g in got] == [("started", t0)] * 3
    assert all(woke >= released for _, _, woke in got)  # one clock for every process of a machine
    assert [p.exitcode for p, _ in children] == [0, 0, 0]


def test_called_off_before_the_release_nobody_starts():
    barrier = Barrier.for_processes(2)
    children = parties(barrier, 2)
    try:
        until_ready(barrier, children)
        barrier.abort()
        got = answers(children)
    finally:
        reap(children, 10)
    assert got == [("called off", None, None)] * 2


def test_a_child_that_dies_before_it_is_ready_is_named():
    barrier = Barrier.for_processes(2)
    children = [spawn("test-party-0", party, barrier, 0), spawn("test-dies", dies_unready)]
    procs = [p for p, _ in children]
    try:
        deadline = time.monotonic() + 30
        while barrier.gone_before_ready(procs) is None:
            assert time.monotonic() < deadline, "the dead child was never noticed"
            time.sleep(0.01)
        assert barrier.gone_before_ready(procs) == 1 and not barrier.all_ready()
        barrier.abort()  # the one that waits stands down
        assert answers(children[:1]) == [("called off", None, None)]
    finally:
        reap(children, 10)
    assert [p.exitcode for p in procs] == [0, 3]


@pytest.mark.timing  # the kill within 5 s of wall time
def test_reap_kills_a_child_that_ignores_the_stop():
    child = spawn("test-stubborn", ignores_sigterm)
    proc, conn = child
    assert conn.poll(30) and conn.recv() == "ignoring"
    terminate([proc])
    started = time.monotonic()
    reap([child], 0.3)
    assert proc.exitcode == -signal.SIGKILL and time.monotonic() - started < 5
    assert conn.closed


def test_a_child_dies_with_its_parent():
    """The parent is SIGKILLed (no chance to reap): the kernel ends its child (PR_SET_PDEATHSIG)."""
    here = Path(__file__).parent
    script = (f"import sys; sys.path.insert(0, {str(here)!r})\n"
              "from servelab.loadgen.barrier import spawn\n"
              "from test_barrier import sleeps\n"
              "proc, _ = spawn('test-orphan', sleeps)\n"
              "print(proc.pid, flush=True)\n"
              "import time; time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        assert psutil.pid_exists(child)
        parent.kill()
        parent.wait(10)
        deadline = time.monotonic() + 10
        while psutil.pid_exists(child) and psutil.Process(child).status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline, "the child outlived its parent"
            time.sleep(0.05)
    finally:
        parent.kill()


# ---- threads (a Ray actor's start line) ----------------------------------------------


def test_threads_arrive_and_are_released_or_called_off():
    barrier = Barrier.for_threads(2)
    got: list = []

    def arrive(k: int) -> None:
        try:
            got.append(barrier.arrive(k))
        except Aborted:
            got.append("called off")

    threads = [threading.Thread(target=arrive, args=(k,)) for k in range(2)]
    threads[0].start()
    assert not barrier.wait_ready(0.05)  # one of two
    threads[1].start()
    assert barrier.wait_ready(5)
    barrier.release(123)
    for t in threads:
        t.join(5)
    assert got == [123, 123]
    barrier.rearm()
    again = threading.Thread(target=arrive, args=(0,))
    again.start()
    barrier.abort()
    again.join(5)
    assert got[-1] == "called off"


@pytest.mark.timing  # the actor's clock within 1 s of ours, and a 0.2 s sleep for the waiter to start
def test_a_ray_party_can_be_released_again_after_a_run():
    """A replica's actor runs its client once per phase: after ``rearm`` it is unprepared and
    unreleased again, and a driver waiting for it wakes when a run ends unprepared."""
    actor = RayParty()
    assert abs(actor.clock() - time.perf_counter_ns()) < 1e9
    waiter = []
    watching = threading.Thread(target=lambda: waiter.append(actor.wait_ready(10)))
    watching.start()
    time.sleep(0.2)
    actor.barrier.rearm()  # the run ended before it was prepared
    watching.join(5)
    assert waiter == [True] and not actor.wait_ready(0.01)
    runner = threading.Thread(target=lambda: waiter.append(actor.barrier.arrive()))
    runner.start()
    assert actor.wait_ready(5)
    actor.release(77)
    runner.join(5)
    assert waiter[-1] == 77
    actor.barrier.rearm()
    assert not actor.barrier.go.is_set() and not actor.wait_ready(0.01)
