"""A saturated host, named only when it is the cause (issue 19 item 4)."""

from __future__ import annotations

import pytest
from diag_timelines import client_at, engine_at, make_timeline, run

from servelab.diagnose.evidence import Host, facts_from_result

CPU_ENGINE = {"kind": "vllm", "args": ["--max-num-seqs", "128"], "env": {"VLLM_CPU_OMP_THREADS_BIND": "1"}}


def machine(busy: float, others: float = 0.0, cpus: int = 2) -> dict:
    return {"cpus": cpus, "seconds": 30.0, "busy_fraction": busy, "ours_fraction": busy - others,
            "others_fraction": others, "local_engine_pids": [4242], "unattributed": []}


def scaled(busy: float, others: float = 0.0, engine=CPU_ENGINE, replicas: int = 2) -> Host:
    ours = {"machine": machine(busy, others), "engine": engine,
            "scale": {"replica": 0, "replicas": replicas, "phase": "together"}}
    return facts_from_result({"servelab": ours}).host


def at_client_cap(host: Host, **facts):
    """The scale replicas' shape: in flight pinned at the client's cap of 2, the engine's scheduler idle."""
    tl = make_timeline(client=client_at(2, waiting=10), engine=engine_at(2, 0, kv=0.02))
    return run(tl, max_concurrency=2, max_num_seqs=128, host=host, **facts)


def test_a_cpu_engine_on_full_cores_is_its_compute_limit_not_room():
    d = at_client_cap(scaled(0.9998))
    assert [v.id for v in d.verdicts] == ["cpu-compute-bound", "client-concurrency-cap"]
    assert "all 2 were 100% busy" in d.top.summary and "compute limit" in d.top.summary
    cap = d.verdicts[1]
    assert cap.confidence == 0.5 and "but the 2 CPUs it computes on were 100% busy" in cap.summary
    assert "engine knobs" not in cap.next and "the engine had room" not in cap.summary
    assert "machine 2 CPUs 100% busy (servelab and the engine 100%, others 0%; a CPU engine, " \
           "2 replica(s) × 1 thread(s) each)" in d.checked


@pytest.mark.parametrize("host, facts, reason", [
    (scaled(0.99, others=0.30), {}, "other programs took 30% of the machine"),
    (scaled(0.99, engine={**CPU_ENGINE, "env": {"VLLM_CPU_OMP_THREADS_BIND": "0-1"}}), {},
     "2 replica(s) × 2 threads exceed its 2 cores"),
    (scaled(0.99), {"request_rate": 4.0, "schedule_lag_p99_ms": 35.0},
     "the client's schedule lag p99 was 35.0 ms (it waited for a core to send)"),
])
def test_the_host_is_named_first_when_the_client_or_replicas_starve(host, facts, reason):
    d = at_client_cap(host, **facts)
    assert d.top.id == "host-contention" and reason in d.top.summary
    assert "cpu-compute-bound" not in [v.id for v in d.verdicts]


def test_a_busy_host_under_a_gpu_engine_is_not_a_verdict():
    gpu_engine = {"kind": "vllm", "args": [], "env": {"CUDA_VISIBLE_DEVICES": "0"}}
    d = at_client_cap(scaled(0.99, engine=gpu_engine))
    assert [v.id for v in d.verdicts] == ["client-concurrency-cap"]
    assert "the engine's scheduler had room" in d.top.summary and "engine knobs" in d.top.next


def test_an_idle_host_is_not_a_verdict():
    assert [v.id for v in at_client_cap(scaled(0.40)).verdicts] == ["client-concurrency-cap"]


@pytest.mark.parametrize("engine, cpu, threads", [
    ({"kind": "llamacpp", "args": ["--threads", "3"]}, True, 3),
    ({"kind": "llamacpp", "args": ["-ngl", "99"]}, False, None),
    ({"kind": "vllm", "env": {"VLLM_CPU_OMP_THREADS_BIND": "0,1|2-3"}}, True, 4),
    ({"kind": "vllm", "memory_report": {"dtype": "float32"}}, True, None),
    ({"kind": "external"}, False, None),
])
def test_which_engines_compute_on_the_cpus(engine, cpu, threads):
    host = scaled(0.5, engine=engine)
    assert (host.cpu_engine, host.threads) == (cpu, threads)


def test_replicas_count_only_when_together_and_no_machine_no_host():
    alone = {"machine": machine(0.5), "engine": CPU_ENGINE, "scale": {"replicas": 4, "phase": "alone"}}
    assert facts_from_result({"servelab": alone}).host.replicas == 1
    assert facts_from_result({"servelab": {}}).host is None


def test_neighbours_beside_an_engine_elsewhere_rank_below_the_limit_that_was_seen():
    """The mock (or a GPU) does not compute on these CPUs: others reach only the client, and
    a client that kept its cap full was not starved into that shape."""
    mock = {"kind": None, "args": []}
    d = at_client_cap(scaled(0.99, others=0.40, engine=mock))
    assert [v.id for v in d.verdicts] == ["client-concurrency-cap", "host-contention"]
    assert d.verdicts[1].level == "low" and "other programs took 40% of the machine" in d.verdicts[1].summary
