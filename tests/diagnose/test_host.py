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


def test_full_cores_under_a_pinned_client_cap_are_not_the_limit_the_cap_is():
    """Issue 34 item 1: busy is not saturated. The client's cap pins the batch (in flight at 2,
    10 waiting for a slot), so the cap is the verdict, with the full cores said beside it."""
    d = at_client_cap(scaled(0.9998))
    assert [v.id for v in d.verdicts] == ["client-concurrency-cap"]
    cap = d.top
    assert cap.confidence == 0.5 and "its 2 CPUs were 100% busy, as a CPU engine's are at any batch" in cap.summary
    assert "the engine's scheduler had room: 0.0 waiting, 2.0 running of its max_num_seqs 128" in cap.summary
    assert "engine knobs" not in cap.next and "batch more on the same full cores" in cap.next
    assert "machine 2 CPUs 100% busy (servelab and the engine 100%, others 0%; a CPU engine, " \
           "2 replica(s) × 1 thread(s) each)" in d.checked


def test_full_cores_with_no_cap_pinning_the_batch_are_the_compute_limit():
    """Running below every cap (2 of 128, the client below its 8) and nothing waiting for a slot."""
    tl = make_timeline(client=client_at(2), engine=engine_at(2, 0, kv=0.02))
    d = run(tl, max_concurrency=8, max_num_seqs=128, host=scaled(0.9998))
    assert d.top.id == "cpu-compute-bound" and "no cap pinned the batch" in d.top.summary


def test_the_readme_example_client_cap_equal_to_max_num_seqs_pins_both():
    """`optimize --max-concurrency 2 -- --max-num-seqs 2` on 2 full cores: running sat at the cap
    of 2 (1.9 on average), 14 waiting for a client slot — not cpu-compute-bound, and not "room"."""
    engine = lambda i: {"running": 1.0 if i % 10 == 0 else 2.0, "waiting": 0.0, "kv_usage": 0.01}
    tl = make_timeline(client=client_at(2, waiting=14), engine=engine)
    d = run(tl, max_concurrency=2, max_num_seqs=2, host=scaled(0.9998, replicas=1))
    assert [v.id for v in d.verdicts] == ["client-concurrency-cap"]
    top = d.top
    assert "had room" not in top.summary
    assert "the engine's max_num_seqs is 2 too (1.9 running on average, at most 2): running sat at it for 90% " \
           "of that time, so both caps pin the batch" in top.summary
    assert "--max-num-seqs" in top.next and "--max-concurrency" in top.next  # both raised in one step
    assert top.evidence["max_num_seqs"] == 2 and top.level == "medium"


def test_ci_case_no_engine_samples_and_the_client_pinned_is_a_cap_not_compute():
    """The CI run that failed: --max-num-seqs 2 under --max-concurrency 32, the engine's /metrics
    samples missing; the client in flight at 32 for 69% of the run, 22.4 waiting for a slot on
    average; 2 full cores. Rule: in flight past a known max_num_seqs waits at the engine
    (scheduler-cap, inferred from the client); with no known engine cap, the client's cap."""
    def client(i: int) -> dict:
        return ({"in_flight": 32, "waiting": round(64 - 64 * i / 69)} if i < 69 else
                {"in_flight": max(1, 31 - (i - 69)), "waiting": 0})
    tl = make_timeline(n=100, client=client, engine=lambda i: {"running": 0.0, "waiting": 0.0})
    host = scaled(0.99, replicas=1)
    d = run(tl, max_concurrency=32, max_num_seqs=2, host=host)
    assert ("engine /metrics: no engine samples during the run with work: 100 in the run showed nothing running"
            " or waiting") in d.not_checked
    c = d.top
    assert "cpu-compute-bound" not in [v.id for v in d.verdicts]
    assert c.id == "scheduler-cap" and c.evidence["limit"] == "max_num_seqs" and c.evidence["max_num_seqs"] == 2
    assert c.evidence["inferred_from"] == "client in flight" and c.evidence["bound"]["share"] == 0.98
    assert "in flight than max_num_seqs 2 lets run" in c.summary and "Raise --max-num-seqs from 2" in c.next
    unknown = run(tl, max_concurrency=32, host=host)  # the engine's cap not known: the client's cap
    assert [v.id for v in unknown.verdicts] == ["client-concurrency-cap"]
    assert unknown.top.evidence["at_cap_share"] == 0.69 and unknown.top.evidence["client_waiting_mean"] == 22.4


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


def test_full_cores_under_the_client_cap_with_the_engine_unseen_still_say_batch_more():
    """CI's run (Dec 2026): the default engine under --max-concurrency 2 on 2 cores 98% busy, vLLM's API
    server answering /metrics for only 42% of the loaded time. The engine's view is left out — but
    unseen is not idle: the full cores are said, and the next step is the CPU engine's (a larger batch
    may use them better), never "engine knobs will not move this"."""
    def starved(i: int) -> dict:  # one answer in 24 ticks (6 s), the rest timed out: each covers 9 ticks
        return {"running": 2.0, "waiting": 0.0, "kv_usage": 0.02} if i % 24 == 0 else {"error": "timed out"}

    tl = make_timeline(n=72, client=client_at(2, waiting=7), engine=starved)
    d = run(tl, max_concurrency=2, host=scaled(0.98, replicas=1))
    cap = d.top
    assert cap.id == "client-concurrency-cap" and cap.confidence == pytest.approx(0.5)
    assert "the engine's state is unknown (/metrics: its samples cover" in cap.summary
    assert "its 2 CPUs were 98% busy, as a CPU engine's are at any batch." in cap.summary
    assert "engine knobs" not in cap.next and "batch more on the same full cores" in cap.next
    assert "engine_waiting_mean" not in cap.evidence  # nothing read from a sliver of the run
    idle_host = run(tl, max_concurrency=2, host=scaled(0.40, replicas=1)).top
    assert "engine knobs will not move this" in idle_host.next  # cores with room: the client's cap alone
