"""A real Ray cluster of two nodes on this machine (Ray's own ``cluster_utils.Cluster``:
two raylets, one CPU each), for the ``--ray`` tests; never a mock of Ray."""

from __future__ import annotations

import contextlib

import pytest


@contextlib.contextmanager
def two_node_cluster(env: dict[str, str] | None = None):
    """The cluster, with this process connected; ``env``: Ray's settings for its raylets."""
    import ray
    from ray.cluster_utils import Cluster

    with pytest.MonkeyPatch.context() as patch:
        for k, v in (env or {}).items():
            patch.setenv(k, v)
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        try:
            yield cluster
        finally:
            ray.shutdown()
            cluster.shutdown()
