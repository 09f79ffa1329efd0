"""``--ray`` (loadgen/ray_shards.py) on a real 2-node Ray cluster on this machine
(Ray's own ``cluster_utils.Cluster``: two raylets), against the mock. Skipped where Ray
is not installed (it is the optional extra ``servelab[ray]``)."""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray")

from servelab.config import LoadSpec  # noqa: E402
from servelab.loadgen.drive import BenchConfig, schedule  # noqa: E402
from servelab.loadgen.ray_shards import run_ray  # noqa: E402
from servelab.records import SampleRequest  # noqa: E402


@pytest.fixture(scope="module")
def two_nodes():
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def test_one_shard_per_node_and_the_merge_is_what_the_shards_measured(two_nodes, mock_server):
    mock = mock_server(ttft_ms=2, itl_ms=2)
    config = BenchConfig(base_url=mock.url, endpoint="/v1/completions", kind="completions", model="mock",
                         load=LoadSpec(request_rate=200.0, max_concurrency=5), seed=3)
    reqs = [SampleRequest(f"hi {i}", 2, 5, f"ray-{i}") for i in range(30)]
    got = run_ray(config, reqs, None, two_nodes.address)
    section = got.section
    nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    assert section["count"] == 2 and {w["node"] for w in section["per_worker"]} == nodes
    assert section["max_concurrency_shares"] == [3, 2]
    assert all(w["failed"] is None and w["records"] == 15 for w in section["per_worker"])
    # offsets measured and bounded (one machine: one clock, so |offset| ≤ its bound)
    assert all(0 < w["clock_bound_ns"] and abs(w["clock_offset_ns"]) <= w["clock_bound_ns"]
               for w in section["per_worker"])
    # the merge is exactly what the shards measured, on the driver's clock
    assert sorted(r.request_id for r in got.run.records) == sorted(r.request_id for s in got.shards
                                                                   for r in s.records)
    assert all(r.success for r in got.run.records) and len(got.run.records) == 30
    # and follows the one schedule from the one start instant
    by_id = {r.request_id: r.intended_ns - got.run.outcome.t0_ns for r in got.run.records}
    assert [by_id[s.request_id] for s in reqs] == [int(o) for o in schedule(config, 30)]
    assert sorted(r.request_id for r in mock.truth().requests) == sorted(by_id)
