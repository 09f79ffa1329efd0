"""``--ray`` (loadgen/ray_shards.py) on a real 2-node Ray cluster on this machine
(Ray's own ``cluster_utils.Cluster``: two raylets bound to 127.0.0.1), against the mock.
Skipped where Ray is not installed (it is the optional extra ``servelab[ray]``). The
node-loss test removes a node: it is the module's last test."""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray")

from servelab.loadgen.hooks import Hooks  # noqa: E402
from servelab.config import LoadSpec  # noqa: E402
from servelab.loadgen.drive import schedule  # noqa: E402
from servelab.loadgen.values import BenchConfig  # noqa: E402
from servelab.loadgen.ray_shards import run_ray  # noqa: E402
from servelab.metrics.tally import Tally  # noqa: E402
from servelab.records import SampleRequest  # noqa: E402
from servelab.results.store import RecordSink  # noqa: E402


# A lost node is declared dead after 5 missed health checks a second apart (Ray's default: 3 s apart);
# not faster: on a loaded machine a live raylet could miss them and be declared dead at start
FAST_HEALTH_CHECK = {"health_check_period_ms": 1000, "health_check_timeout_ms": 2000,
                     "health_check_failure_threshold": 5}


@pytest.fixture(scope="module")
def two_nodes():
    from ray_helpers import two_node_cluster

    with two_node_cluster(system_config=FAST_HEALTH_CHECK) as cluster:
        yield cluster


def shard_actor_processes(cluster) -> list:
    from ray_helpers import actor_processes

    return actor_processes(cluster, "ShardActor")


def run_with_a_kill(cluster, mock_server, kill, rate: float, n: int) -> tuple:
    """A run of ``n`` requests at ``rate`` on the cluster with ``kill`` started in a thread at t0:
    (its WorkersRun, the entries of the shards that failed, the records kept)."""
    import threading

    mock = mock_server(ttft_ms=5, itl_ms=20)
    config = BenchConfig(base_url=mock.url, endpoint="/v1/completions", kind="completions", model="mock",
                         load=LoadSpec(request_rate=rate), seed=3)
    reqs = [SampleRequest(f"hi {i}", 2, 10, f"rayk-{i}") for i in range(n)]
    killer = threading.Thread(target=kill)
    sink = RecordSink(Tally(reqs))
    got = run_ray(config, reqs, None, cluster.address, Hooks(on_start=lambda counters: killer.start()), sink=sink)
    killer.join()
    return got, [w for w in got.section["per_worker"] if w["failed"]], sink.tally.records()


@pytest.mark.timing  # the refusal within 60 s of wall time
def test_a_head_that_cannot_be_reached_is_one_line_within_the_deadline_not_a_hang(mock_server, qwen3_path):
    """Ray alone retries such a connect for ever ("Failed to connect to GCS … within 5 seconds")."""
    import subprocess
    import sys
    import time

    from net_helpers import free_port

    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    mock = mock_server()
    argv = [sys.executable, "-m", "servelab.cli.main", "bench", "--base-url", mock.url, "--model", "mock",
            "--tokenizer", qwen3_path, "--dataset-name", "random", "--num-prompts", "4", "--random-input-len", "8",
            "--random-output-len", "4", "--ray", address, "--ray-connect-timeout-s", "4", "--disable-tqdm"]
    began = time.monotonic()
    got = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    err = got.stderr.strip().splitlines()
    assert got.returncode == 2 and len(err) == 1, got.stderr
    assert err[0] == (f"servelab: error: --ray {address}: no Ray cluster answered within 4 s "
                      "(--ray-connect-timeout-s); is its head running and reachable from here?"), err
    assert time.monotonic() - began < 60


def test_one_shard_per_node_and_the_merge_is_what_the_shards_measured(two_nodes, mock_server):
    mock = mock_server(ttft_ms=2, itl_ms=2)
    config = BenchConfig(base_url=mock.url, endpoint="/v1/completions", kind="completions", model="mock",
                         load=LoadSpec(request_rate=200.0, max_concurrency=5), seed=3)
    reqs = [SampleRequest(f"hi {i}", 2, 5, f"ray-{i}") for i in range(30)]
    sink = RecordSink(Tally(reqs))
    got = run_ray(config, reqs, None, two_nodes.address, sink=sink)
    records = sink.tally.records()
    section = got.section
    nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    assert section["count"] == 2 and {w["node"] for w in section["per_worker"]} == nodes
    assert section["max_concurrency_shares"] == [3, 2]
    assert all(w["failed"] is None and w["records"] == 15 for w in section["per_worker"])
    # offsets measured and bounded (one machine: one clock, so |offset| ≤ its bound)
    assert all(0 < w["clock_bound_ns"] and abs(w["clock_offset_ns"]) <= w["clock_bound_ns"]
               for w in section["per_worker"])
    # the merge is exactly what the shards measured, on the driver's clock
    assert [s.made for s in got.shards] == [15, 15]
    assert sorted(r.request_id for r in records) == sorted(s.request_id for s in reqs)
    assert all(r.success for r in records) and len(records) == 30
    # and follows the one schedule from the one start instant
    by_id = {r.request_id: r.intended_ns - got.run.outcome.t0_ns for r in records}
    assert [by_id[s.request_id] for s in reqs] == [int(o) for o in schedule(config, reqs)]
    assert sorted(r.request_id for r in mock.truth().requests) == sorted(by_id)


def test_an_actor_killed_mid_run_ends_the_run_and_the_others_records_are_kept(two_nodes, mock_server):
    import os
    import signal
    import time

    def kill_one_shard() -> None:
        time.sleep(2.0)  # past a few batches handed over (every RECORDS_EVERY_S)
        os.kill(shard_actor_processes(two_nodes)[0].pid, signal.SIGKILL)  # ours: other clusters may run here

    got, failed, kept = run_with_a_kill(two_nodes, mock_server, kill_one_shard, 20.0, 60)
    from_dead = [r for r in kept if int(r.request_id.split("-")[1]) % 2 == failed[0]["worker"]]
    # what the dead shard had handed over before it died is kept; only its tail is lost
    assert len(failed) == 1 and failed[0]["records"] == len(from_dead) > 0 and "Actor" in failed[0]["failed"]
    assert failed[0]["lost_requests"] == 30 - len(from_dead)
    assert len(got.failed) == 1 and f"{30 - len(from_dead)} of its 30 requests are lost" in got.failed[0]
    survivor = next(w for w in got.section["per_worker"] if not w["failed"])
    assert 0 < survivor["records"] < 30 and survivor["records"] + len(from_dead) == len(kept)  # stopped early
    assert got.run.outcome.interrupted


def test_bench_with_ray_writes_the_same_keys_as_one_process(two_nodes, mock_server, qwen3_path, tmp_path, capsys):
    import dataclasses

    from servelab.config import BenchSpec, DatasetSpec, OutputSpec, ServerSpec
    from servelab.measure.run import execute

    mock = mock_server(ttft_ms=2, itl_ms=40)
    spec = BenchSpec(server=ServerSpec(base_url=mock.url), load=LoadSpec(request_rate=300.0, max_concurrency=4),
                     dataset=DatasetSpec(name="random", num_prompts=20, random_input_len=16, random_output_len=6),
                     output=OutputSpec(progress=False, telemetry=False), tokenizer=qwen3_path)
    one = execute(spec)
    # telemetry on: the nodes' counters, polled, are the client samples
    on_ray = execute(dataclasses.replace(
        spec, load=dataclasses.replace(spec.load, ray=two_nodes.address, request_rate=100.0),
        output=dataclasses.replace(spec.output, telemetry=True, telemetry_interval_s=0.05)))
    assert on_ray.exit_code == 0 and on_ray.summary.completed == 20
    assert set(on_ray.result) == set(one.result)
    assert set(on_ray.result["servelab"]) - {"workers", "telemetry"} == set(one.result["servelab"])
    assert 0 < on_ray.result["servelab"]["telemetry"]["client"]["in_flight"]["max"] <= 4
    assert [w["records"] for w in on_ray.result["servelab"]["workers"]["per_worker"]] == [10, 10]
    assert "one shard per node" in capsys.readouterr().out
    # the mock is the test's own child: its CPU is servelab's; Ray's actors may not be
    from servelab.telemetry.machine import RAY_ACTORS

    assert one.result["servelab"]["machine"]["unattributed"] == []
    assert on_ray.result["servelab"]["machine"]["unattributed"] == [RAY_ACTORS]


def test_records_an_ended_shard_made_but_the_driver_could_not_take_are_counted_lost():
    import dataclasses

    import numpy as np

    from servelab.loadgen.ray_shards import _entry
    from servelab.loadgen.shards import Shard
    from servelab.loadgen.shards import ShardRun

    shard = Shard(0, tuple(SampleRequest("p", 1, 2, f"r{i}") for i in range(5)), np.zeros(5, np.int64), None)
    names = [f.name for f in dataclasses.fields(ShardRun)]
    run = ShardRun(**{n: 0 for n in names} | {"made": 5, "requests": 5, "lag_ms": (0.0, 0.0), "cpu_s": 0.0,
                                                "wall_start": 0.0, "interrupted": False})
    assert _entry(shard, "node", (0, 0), run, 3)["lost_requests"] == 2
    assert _entry(shard, "node", (0, 0), run, 5)["lost_requests"] == 0


def test_an_actor_that_never_becomes_ready_ends_the_run_naming_its_node_and_none_is_left(two_nodes, mock_server,
                                                                                        monkeypatch):
    """The second node's only CPU is taken: its shard actor cannot be placed, and so never gets ready."""
    from servelab.errors import ServerError
    from servelab.loadgen import ray_shards

    class Squatter:
        def ping(self) -> int:
            return 1

    node = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])[1]
    squatter = ray_shards.on_node(ray, Squatter, node).remote()
    ray.get(squatter.ping.remote())
    monkeypatch.setattr(ray_shards, "READY_S", 3.0)
    mock = mock_server()
    config = BenchConfig(base_url=mock.url, endpoint="/v1/completions", kind="completions", model="mock",
                         load=LoadSpec(request_rate=50.0), seed=3)
    reqs = [SampleRequest(f"hi {i}", 2, 5, f"rayn-{i}") for i in range(10)]
    with pytest.raises(ServerError) as raised:
        run_ray(config, reqs, None, two_nodes.address, sink=RecordSink(Tally(reqs)))
    said = str(raised.value)
    assert said.startswith(f"--ray: the shard actor on Ray node {node[:12]} (shard ") and "\n" not in said
    assert said.endswith("failed before the start: not ready in 3 s; nothing was sent")
    ray.kill(squatter)  # the CPU is free again: a shard actor left pending would start now
    import time

    time.sleep(3.0)
    assert shard_actor_processes(two_nodes) == [] and len(mock.truth().requests) == 0


def test_a_node_lost_mid_run_is_named_its_returned_records_kept_and_its_share_counted(two_nodes, mock_server):
    """The second node's raylet is killed mid-run (SIGKILL): the node, and its actor, are gone."""
    import time

    worker_node = next(iter(two_nodes.worker_nodes))
    lost_id = worker_node.node_id

    def kill_its_raylet() -> None:
        time.sleep(2.0)  # past a few batches handed over (every RECORDS_EVERY_S)
        from ray._private import ray_constants

        worker_node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.kill()

    got, failed, kept = run_with_a_kill(two_nodes, mock_server, kill_its_raylet, 10.0, 80)
    assert [w["node"] for w in failed] == [lost_id]
    from_lost = [r for r in kept if int(r.request_id.split("-")[1]) % 2 == failed[0]["worker"]]
    assert failed[0]["records"] == len(from_lost) > 0 and failed[0]["lost_requests"] == 40 - len(from_lost)
    assert len(got.failed) == 1 and got.failed[0].startswith(f"Ray node {lost_id[:12]} (shard {failed[0]['worker']})")
    assert f"{40 - len(from_lost)} of its 40 requests are lost" in got.failed[0]
    assert got.run.outcome.interrupted
    time.sleep(2.0)
    assert shard_actor_processes(two_nodes) == []  # the survivor stopped and killed, the lost one gone with its node


def test_a_connect_deadline_that_is_not_positive_is_refused_before_ray_is_asked():
    from servelab.errors import InputError
    from servelab.loadgen.ray_connect import connect

    with pytest.raises(InputError, match=r"^--ray-connect-timeout-s must be more than 0 seconds, not 0$"):
        connect("127.0.0.1:1", 0.0)
