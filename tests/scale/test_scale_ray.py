"""``servelab scale --ray`` (scale/ray.py) on a real 2-node Ray cluster on this machine
(Ray's own ``cluster_utils.Cluster``: two raylets), replicas of test_scale.py's mock with
known per-replica rates. Skipped where Ray is not installed (the extra ``servelab[ray]``)."""

from __future__ import annotations

import dataclasses

import sys
import time

import psutil
import pytest
from ray_helpers import two_node_cluster
from test_scale_run import OUTPUT_LEN, RATE, STUB, replica_1_failed, result, scale

from servelab.cli.main import main

ray = pytest.importorskip("ray")

# The known-rate test is wall-clock sensitive (rates within 1 %, the stagger within 0.2 s: bad16e6).
# Every test on the two-node cluster (module scope) runs in its tier, so the cluster starts once,
# as before the tiers were split; the tests without a cluster stay in the default tier.
on_the_cluster = pytest.mark.timing


# Ray's own net (a worker's children killed when it exits) is off, so these tests see
# servelab's: an engine must not rely on it (it misses a raylet that dies with its worker).
RAY_NET_OFF = {"RAY_kill_child_processes_on_worker_exit": "false",
               "RAY_kill_child_processes_on_worker_exit_with_raylet_subreaper": "false"}


@pytest.fixture(scope="module")
def two_nodes():
    with two_node_cluster(RAY_NET_OFF) as cluster:
        yield cluster


def alive_nodes() -> set[str]:
    return {n["NodeID"] for n in ray.nodes() if n["Alive"]}


def gone(pids, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@on_the_cluster
def test_each_replica_on_its_own_node_and_the_sum_in_the_window_is_the_known_rate(two_nodes, tmp_path, capsys):
    assert main(_with_ray(scale(tmp_path, 2, 1, "--len-step", "10"), two_nodes.address)) == 0
    r = result(tmp_path)
    placed = r["ray"]["replicas"]
    assert [p["replica"] for p in placed] == [0, 1]
    assert {p["node"] for p in placed} == alive_nodes()  # one replica on each node
    assert [e["ray_node"] for e in r["engines"]] == [p["node"] for p in placed]
    assert "one replica per node" in r["ray"]["placement"]
    # the offsets that put each node's records on the driver's clock, each within its bound
    # (one machine: one clock, so |offset| ≤ bound)
    assert all(0 < p["clock_bound_ns"] and abs(p["clock_offset_ns"]) <= p["clock_bound_ns"] for p in placed)
    truth = [RATE * (OUTPUT_LEN + 10 * i) for i in range(2)]  # 500, 750 tok/s
    for replica, rate in zip(r["together"]["replicas"], truth):
        assert replica["output_tok_s"] == pytest.approx(rate, rel=0.01)
    assert r["together"]["total"]["output_tok_s"] == pytest.approx(sum(truth), rel=0.01)
    assert r["single"]["output_tok_s"]["mean"] == pytest.approx(truth[0], rel=0.01)  # alone: replica 0's node
    # the stagger, seen across nodes' clocks; a ramp end is a maximum over first tokens, so one late
    # token of a stub sharing two cores moves it (test_scale_run checks the rule itself exactly)
    ramps = [x["ramp_end_s"] for x in r["together"]["replicas"]]
    assert ramps[1] - ramps[0] == pytest.approx(0.9, abs=0.2)
    out = capsys.readouterr().out
    assert "Ray node" in out and "on Ray (2 nodes; one replica per node): 0→" in out


def _with_ray(argv: list[str], address: str) -> list[str]:
    """``--ray ADDRESS`` among scale's flags (before ``--`` and the engine's command line)."""
    cut = argv.index("--")
    return [*argv[:cut], "--ray", address, *argv[cut:]]


@on_the_cluster
def test_more_replicas_than_nodes_go_round_robin(two_nodes, tmp_path, capsys):
    assert main(_with_ray(scale(tmp_path, 3, 1), two_nodes.address)) == 0
    r = result(tmp_path)
    nodes = [p["node"] for p in r["ray"]["replicas"]]
    assert nodes[0] == nodes[2] != nodes[1]
    assert "round-robin: 3 replicas on 2 nodes" in r["ray"]["placement"]
    assert r["together"]["total"]["output_tok_s"] == pytest.approx(3 * RATE * OUTPUT_LEN, rel=0.01)
    assert "replicas placed round-robin: 3 replicas on 2 nodes" in capsys.readouterr().out


@on_the_cluster
def test_a_replica_that_fails_to_start_on_its_node_stops_the_others(two_nodes, tmp_path, capsys):
    code = main(_with_ray(scale(tmp_path, 2, 1, "--fail-replica", "1"), two_nodes.address))
    pids = replica_1_failed(code, tmp_path, capsys)
    assert set(pids) == {"replica-0.pid", "replica-1.pid"}
    assert gone(pids.values())


@on_the_cluster
def test_an_actor_killed_takes_its_engine_with_it(two_nodes, tmp_path):
    """The driver's death: Ray kills its actors' processes; the engine's watchdog ends the engine."""
    from net_helpers import free_ports

    from servelab.engines import EngineSpec
    from servelab.loadgen.ray_shards import on_node
    from servelab.scale.ray import ReplicaActor

    port = free_ports(1)
    spec = EngineSpec(name="stub", kind="command", port=port, ready_url=f"http://127.0.0.1:{port}/v1/models",
                      command=(sys.executable, str(STUB), str(port), "0", str(tmp_path)))
    actor = on_node(ray, ReplicaActor, sorted(alive_nodes())[0], num_cpus=0).remote()
    got = ray.get(actor.start.remote(0, spec, (0, 1), tmp_path / "engine", False, 0))
    pid = int((tmp_path / "replica-0.pid").read_text())
    assert "error" not in got and got["pid"] == pid and psutil.pid_exists(pid)
    ray.kill(actor)
    assert gone([pid]), "the engine outlived its actor"


def test_a_nodes_records_come_onto_the_drivers_clock():
    """A node whose clock reads 7 s ahead: its run's times, and its t0, move back by 7 s."""
    from servelab.records import RequestRecord
    from servelab.scale.ray import _on_driver_clock
    from servelab.scale.local import JobRun

    ahead, t0 = 7_000_000_000, 1_000_000
    r = RequestRecord(request_id="a", prompt_len=1, expected_output_len=2, intended_ns=t0 + ahead + 10,
                      dispatched_ns=t0 + ahead + 11, sent_ns=t0 + ahead + 12, done_ns=t0 + ahead + 40,
                      token_ns=(t0 + ahead + 20, t0 + ahead + 40), token_counts=(1, 1), output_tokens=2,
                      first_reasoning_ns=t0 + ahead + 20, first_answer_ns=t0 + ahead + 40)
    run = _on_driver_clock(JobRun(1, [r, dataclasses.replace(r, first_reasoning_ns=0, first_answer_ns=0)], {}, 0,
                                  t0 + ahead), ahead, t0)
    got = run.records[0]
    assert run.t0_ns == t0 and (got.intended_ns, got.sent_ns, got.done_ns) == (t0 + 10, t0 + 12, t0 + 40)
    assert got.token_ns == (t0 + 20, t0 + 40)
    assert (got.first_reasoning_ns, got.first_answer_ns) == (t0 + 20, t0 + 40)  # reasoning TTFT is sent-relative
    assert (run.records[1].first_reasoning_ns, run.records[1].first_answer_ns) == (0, 0)  # none seen stays none


@on_the_cluster
def test_a_replica_whose_actor_dies_mid_run_ends_the_run_and_leaves_nothing(two_nodes, tmp_path, capsys):
    import os
    import signal
    import threading

    def kill_replica_1_actor() -> None:  # once the together run is under way
        folder = tmp_path / "results" / "scale" / "replica-1" / "together"
        while not folder.exists():
            time.sleep(0.05)
        time.sleep(1.5)
        engine = int((tmp_path / "replica-1.pid").read_text())
        os.kill(psutil.Process(engine).ppid(), signal.SIGKILL)  # the actor that started it

    killer = threading.Thread(target=kill_replica_1_actor, daemon=True)
    killer.start()
    code = main(_with_ray(scale(tmp_path, 2, 1), two_nodes.address))
    killer.join(timeout=5)
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1, err
    assert "replica 1's client on Ray node" in err[0] and "actor died" in err[0], err
    pids = [int(f.read_text()) for f in tmp_path.glob("replica-*.pid")]
    assert len(pids) == 2 and gone(pids)


def test_replicas_sharing_a_node_split_its_cores():
    from servelab.scale.ray import slot

    # 5 replicas on 2 nodes: node 0 holds 0, 2, 4 (a third each), node 1 holds 1, 3 (a half each)
    assert [slot(i, 5, 2) for i in range(5)] == [(0, 3), (0, 2), (1, 3), (1, 2), (2, 3)]
    assert [slot(i, 2, 4) for i in range(2)] == [(0, 1), (0, 1)]


def test_the_empty_device_list_ray_gives_a_gpu_less_actor_is_not_taken_as_no_gpus(monkeypatch):
    """Ray sets CUDA_VISIBLE_DEVICES="" in an actor that reserves no GPU: the replica's actor
    drops it, so the node's devices are found (NVML) and shared; a real list is kept."""
    import os

    from servelab.scale.ray import ReplicaActor

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    ReplicaActor()
    assert "CUDA_VISIBLE_DEVICES" not in os.environ
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    ReplicaActor()
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "2,3"
