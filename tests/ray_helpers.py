"""A real Ray cluster of two nodes on this machine (Ray's own ``cluster_utils.Cluster``:
two raylets, one CPU each), bound to 127.0.0.1 as a user's test cluster would be, for the
``--ray`` tests; never a mock of Ray. The test process joins it as servelab does
(loadgen/ray_connect.py: a loopback address is kept, not rewritten to the machine's IP)."""

from __future__ import annotations

import contextlib

import pytest

LOOPBACK = "127.0.0.1"


@contextlib.contextmanager
def two_node_cluster(env: dict[str, str] | None = None, system_config: dict | None = None):
    """The cluster, with this process connected; ``env``: Ray's settings for its raylets;
    ``system_config``: the head's (e.g. a faster health check, to see a lost node sooner)."""
    import ray
    from ray.cluster_utils import Cluster

    from servelab.loadgen.ray_connect import connect

    with pytest.MonkeyPatch.context() as patch:
        for k, v in (env or {}).items():
            patch.setenv(k, v)
        head = {"num_cpus": 1, "node_ip_address": LOOPBACK} | ({"_system_config": system_config} if system_config else {})
        cluster = Cluster(initialize_head=True, head_node_args=head)
        cluster.add_node(num_cpus=1, node_ip_address=LOOPBACK)
        cluster.wait_for_nodes()
        try:
            connect(cluster.address)
            yield cluster
        finally:
            ray.shutdown()
            cluster.shutdown()


def actor_processes(cluster, name: str) -> list:
    """This cluster's processes of actor class ``name`` (children of its raylets): never another
    session's, though other Ray clusters may run on the same machine."""
    import psutil
    from ray._private import ray_constants

    nodes = [cluster.head_node, *cluster.worker_nodes]
    raylets = {p.process.pid for n in nodes for p in n.all_processes.get(ray_constants.PROCESS_TYPE_RAYLET, [])}
    found = []
    for p in psutil.process_iter(["cmdline", "ppid"]):
        if (p.info["cmdline"] or [""])[0].startswith(f"ray::{name}") and p.info["ppid"] in raylets:
            found.append(p)
    return found
