"""Every verdict, on hand-built timelines; ambiguous and missing-data cases."""

from __future__ import annotations

import math

import pytest
from diag_timelines import H200, client_at, engine_at, make_timeline, run, verdict_ids

from servelab.diagnose.evidence import RunFacts, evidence
from servelab.diagnose.rules import client_concurrency_cap, kv_capacity, scheduler_cap


def test_client_concurrency_cap_when_the_engine_has_room():
    tl = make_timeline(client=client_at(8, waiting=40), engine=engine_at(8, 0, kv=0.12))
    d = run(tl, max_concurrency=8)
    top = d.top
    assert [v.id for v in d.verdicts] == ["client-concurrency-cap"]
    assert top.confidence >= 0.75 and top.level == "high"
    assert top.evidence["at_cap_share"] == 1.0 and top.evidence["engine_waiting_mean"] == 0.0
    assert "--max-concurrency 8" in top.summary and "8.0 in flight" in top.summary and "12%" in top.summary
    assert "8 → 16, 32" in top.next and "engine knobs" in top.next


def test_scheduler_cap_at_the_known_max_num_seqs():
    tl = make_timeline(client=client_at(32), engine=engine_at(2, 30, kv=0.02))
    top = run(tl, max_concurrency=32, max_num_seqs=2).top
    assert top.id == "scheduler-cap" and top.confidence == pytest.approx(0.9)
    assert top.evidence["max_num_seqs"] == 2 and top.evidence["waiting_median"] == 30
    assert "max_num_seqs 2" in top.summary and "30 waiting" in top.summary
    assert "--max-num-seqs from 2" in top.next


def test_scheduler_cap_inferred_from_a_plateau_after_a_ramp():
    ramp = {0: (1, 0), 1: (3, 0), 2: (5, 0)}
    engine = lambda i: {"running": ramp.get(i, (6, 10))[0], "waiting": ramp.get(i, (6, 10))[1], "kv_usage": 0.2}
    d = run(make_timeline(client=client_at(16), engine=engine), max_concurrency=16)
    assert d.top.id == "scheduler-cap" and d.top.confidence == pytest.approx(0.7)
    assert d.top.evidence["plateau"] == 6 and "inferred from the plateau" in d.top.summary
    assert "max_num_seqs not known (a cap is inferred from a plateau)" in d.not_checked


def test_scheduler_cap_from_the_token_budget():
    # running varies (no count cap), but each step carries ~1,800 of 2,048 budget tokens
    engine = lambda i: {"running": 3 + i % 4, "waiting": 5, "kv_usage": 0.3,
                        "iteration_tokens_sum": 1800.0 * i, "iteration_tokens_count": float(i)}
    top = run(make_timeline(client=client_at(16), engine=engine), max_num_batched_tokens=2048).top
    assert top.id == "scheduler-cap" and top.confidence == pytest.approx(0.85)
    assert top.evidence["tokens_per_step"] == 1800.0 and "--max-num-batched-tokens from 2048" in top.next
    # the first sample has no step before it: 39 of 40 samples, from the second tick to the end
    assert top.evidence["limit"] == "max_num_batched_tokens" and top.evidence["bound"]["share"] == 0.975
    assert "for 98% of the run, 0–10 s" in top.summary


def test_below_the_known_max_num_seqs_a_plateau_is_not_a_scheduler_cap():
    """A queue below the count cap, with room in the cache: not max_num_seqs, and not "no queue"
    either — the token budget is what is left, named at low confidence since the result omits it."""
    tl = make_timeline(client=client_at(32), engine=engine_at(5, 27, kv=0.5))
    v = scheduler_cap(evidence(RunFacts(max_concurrency=32, max_num_seqs=64), tl))
    assert v.evidence["limit"] == "unknown" and v.level == "low" and "plateau" not in v.evidence
    assert "running stays below max_num_seqs 64" in v.summary and "--max-num-batched-tokens" in v.next
    # with the budget known and steps far below it, nothing is named a cap
    steps = engine_at(5, 27, kv=0.5, iteration_tokens_sum=0.0, iteration_tokens_count=0.0)
    ev = evidence(RunFacts(max_concurrency=32, max_num_seqs=64, max_num_batched_tokens=2048),
                  make_timeline(client=client_at(32), engine=steps))
    assert scheduler_cap(ev) is None


def test_kv_capacity_from_preemptions():
    engine = lambda i: {"running": 10 + i % 3, "waiting": 6, "kv_usage": 0.97, "preemptions": 2.0 * i}
    d = run(make_timeline(n=40, client=client_at(32), engine=engine), max_concurrency=32)
    assert d.top.id == "kv-capacity" and d.top.confidence == pytest.approx(0.9)
    assert d.top.evidence["preemptions"] == 2.0 * 39 and "78 preemptions" in d.top.summary
    assert "quantize" in d.top.next and "--gpu-memory-utilization" in d.top.next
    assert "scheduler-cap" not in [v.id for v in d.verdicts if v.confidence >= 0.5]


def test_full_cache_with_a_flat_running_count_ranks_scheduler_cap_first():
    """Ambiguous: the mock's KV gauge reads running/max_open, so it shows 100% at
    its cap. A count that never moves and no preemptions point to a count limit;
    the KV verdict stays, ranked below."""
    tl = make_timeline(client=client_at(16), engine=engine_at(2, 14, kv=1.0))
    d = run(tl, max_concurrency=16)
    assert [v.id for v in d.verdicts] == ["scheduler-cap", "kv-capacity"]
    assert d.verdicts[0].confidence > d.verdicts[1].confidence


def test_near_full_cache_without_a_queue_is_a_low_confidence_warning():
    tl = make_timeline(client=client_at(4), engine=engine_at(4, 0, kv=0.96))
    ev = evidence(RunFacts(max_concurrency=8), tl)
    v = kv_capacity(ev)
    assert v is not None and v.level == "low"


@pytest.mark.parametrize("facts, needle", [
    ({"client_cpu_fraction": 0.98}, "client CPU 98% of a core"),
    ({"schedule_lag_p99_ms": 60.0, "request_rate": 50.0}, "schedule lag p99 60.0 ms"),
])
def test_client_bound(facts, needle):
    d = run(make_timeline(client=client_at(4, cpu=0.2), engine=engine_at(4, 0)), **facts)
    assert d.top.id == "client-bound" and needle in d.top.summary and d.top.confidence >= 0.75
    assert "understate the server" in d.top.summary


def test_schedule_lag_does_not_count_when_every_request_is_due_at_t0():
    d = run(make_timeline(client=client_at(4), engine=engine_at(4, 0)),
            schedule_lag_p99_ms=60.0, request_rate=math.inf)
    assert "client-bound" not in [v.id for v in d.verdicts]


def test_saturated_sampler_ticks_alone_make_the_client_bound():
    d = run(make_timeline(client=client_at(64, cpu=0.99), engine=engine_at(64, 0)))
    assert d.top.id == "client-bound" and d.top.evidence["cpu_saturated_share"] == 1.0


def _gpu(util, mem_util, power):
    return lambda i: [{"util": util, "mem_util": mem_util, "mem_used_gib": 120.0, "power_w": power,
                       "sm_clock_mhz": 1980, "pstate": 0}]


def test_gpu_underutilized():
    tl = make_timeline(client=client_at(2), engine=engine_at(2, 0), gpu=_gpu(18, 5, 150.0), gpu_devices=[H200])
    ids = verdict_ids(tl)
    assert ids == ["gpu-underutilized"]
    top = run(tl).top
    assert top.evidence["gpu_util_mean"] == 18.0 and "18%" in top.summary and "2.0 requests running" in top.summary


def test_memory_bandwidth_bound():
    tl = make_timeline(client=client_at(64), engine=engine_at(40, 0, kv=0.5), gpu=_gpu(97, 72, 620.0),
                       gpu_devices=[H200])
    top = run(tl, output_throughput=3100.0).top
    assert top.id == "memory-bandwidth-bound"
    assert top.evidence == {"gpu": 0, "util_mean": 97.0, "mem_util_mean": 72.0, "power_w_mean": 620.0,
                            "power_limit_w": 700.0, "output_tok_s": 3100.0, "weight_read_share": None}
    assert "620 W of 700 W" in top.summary and "5.00 output tok/s per W" in top.summary
    assert top.confidence == 0.5 and "inferred from power and memory activity alone" in top.summary


def test_memory_bandwidth_bound_is_checked_against_the_gpus_peak_when_the_weights_are_known():
    # 16 GiB of weights, 16 running, 3100 tok/s: 193.75 steps/s x 17.2 GB = 3.33 TB/s of the H200's 4.8
    tl = make_timeline(client=client_at(64), engine=engine_at(16, 0, kv=0.5), gpu=_gpu(97, 72, 620.0),
                       gpu_devices=[H200])
    top = run(tl, output_throughput=3100.0, weights_gib=16.0).top
    assert top.id == "memory-bandwidth-bound" and top.confidence == 0.75
    assert top.evidence["weight_read_share"] == 0.693  # 193.75 × 16 GiB ÷ 4.8 TB/s
    assert "Reading the weights once per decode step takes at least 69% of its 4.8 TB/s." in top.summary


def test_a_hot_gpu_whose_throughput_reads_little_memory_is_not_called_bandwidth_bound():
    # the same GPU readings, 64 running: 48 steps/s x 17.2 GB = 0.83 TB/s, 17% of peak
    tl = make_timeline(client=client_at(64), engine=engine_at(64, 0, kv=0.5), gpu=_gpu(97, 72, 620.0),
                       gpu_devices=[H200])
    assert "memory-bandwidth-bound" not in verdict_ids(tl, output_throughput=3100.0, weights_gib=16.0)


def test_gpu_samples_while_nothing_is_in_flight_do_not_count():
    client = lambda i: {"in_flight": 2 if i >= 20 else 0, "waiting": 0, "cpu": 0.05, "lag_ms": 0.1}
    util = lambda i: [{"util": 90 if i >= 20 else 0, "mem_util": 10, "mem_used_gib": 120.0, "power_w": 300.0}]
    tl = make_timeline(client=client, engine=engine_at(2, 0), gpu=util, gpu_devices=[H200])
    assert "gpu-underutilized" not in verdict_ids(tl)


def test_no_limit_found_says_what_was_checked():
    d = run(make_timeline(client=client_at(3), engine=engine_at(3, 0, kv=0.1, preemptions=lambda i: 0.0)),
            client_cpu_fraction=0.1, schedule_lag_p99_ms=0.2)
    assert d.top.id == "no-limit-found" and d.top.level == "low"  # the GPU was not seen
    assert d.checked[0] == "client CPU 10% of a core, schedule lag p99 0.20 ms"
    assert "engine running mean 3.0, max 3; waiting mean 0.0, median 0, max 0; KV usage mean 10%, " \
           "max 10%; 0 preemptions" in d.checked
    assert "client in flight mean 3.0, max 3 (sampled; no cap), waiting for a slot mean 0.0" in d.checked
    assert d.not_checked == ("GPU (NVML): NVML unavailable (test)", "max_num_seqs not known (a cap is inferred from a plateau)")


def test_without_metrics_the_client_cap_is_reported_with_lower_confidence():
    d = run(make_timeline(client=client_at(8, waiting=20), engine_absent="HTTP 404"), max_concurrency=8)
    assert d.top.id == "client-concurrency-cap" and d.top.confidence == pytest.approx(0.5)
    assert "engine's state is unknown" in d.top.summary
    assert "engine /metrics: HTTP 404" in d.not_checked


def test_without_metrics_no_engine_rule_fires():
    ids = verdict_ids(make_timeline(client=client_at(3), engine_absent="unreachable (refused)"), max_concurrency=8)
    assert ids == ["no-limit-found"]


def test_engine_idle_during_the_whole_run_counts_as_missing():
    d = run(make_timeline(client=client_at(1), engine=engine_at(0, 0)))
    assert ("engine /metrics: no engine samples during the run with work: 40 in the run showed nothing running"
            " or waiting") in d.not_checked


def test_engine_samples_missing_from_the_run_say_why_in_figures():
    """A run whose scrapes all failed, or whose scraper took none inside the run (starved), says
    which, with the count or the longest gap: a missing engine view is never left unexplained."""
    failing = make_timeline(client=client_at(8), engine=lambda i: {"error": "timed out"})
    assert ("engine /metrics: no engine samples during the run: all 40 scrapes in it failed (timed out)"
            in run(failing).not_checked)
    starved = make_timeline(client=client_at(8))
    starved.samples[:0] = [{"t_ms": -120.0, "src": "engine", "running": 0.0, "waiting": 0.0}]
    starved.samples.append({"t_ms": 10_400.0, "src": "engine", "running": 0.0, "waiting": 0.0})
    assert ("engine /metrics: no engine samples during the run: the scraper took none in its 10.0 s;"
            " longest gap between samples 10.5 s") in run(starved).not_checked


def test_no_timeline_uses_the_result_alone():
    d = run(None, client_cpu_fraction=0.95, max_concurrency=4)
    assert [v.id for v in d.verdicts] == ["client-bound"]
    assert d.not_checked == ("engine, GPU and client: no timeline (telemetry was off, or its file is gone)",)
    blind = run(None, client_cpu_fraction=0.2).top  # no samples: it cannot judge, and says why
    assert blind.id == "not-judged" and "no timeline" in blind.summary and "offered load" not in blind.next


def test_llamacpp_has_no_kv_gauge_and_still_shows_its_slot_cap():
    """llama.cpp: requests_processing pinned at its slots while requests_deferred queue."""
    tl = make_timeline(client=client_at(16), engine=engine_at(4, 12, kv=None),
                       names={"running": "llamacpp:requests_processing", "waiting": "llamacpp:requests_deferred"})
    d = run(tl, max_concurrency=16)
    assert d.top.id == "scheduler-cap" and "KV usage not reported" in d.top.summary
    assert "--parallel" in d.top.next and "--max-num-seqs" not in d.top.next
    assert "slots (--parallel) not known (a cap is inferred from a plateau)" in d.not_checked
    assert "kv-capacity" not in [v.id for v in d.verdicts]


def test_llamacpp_slots_from_its_memory_report_are_the_known_cap():
    tl = make_timeline(client=client_at(16), engine=engine_at(4, 12, kv=None),
                       names={"running": "llamacpp:requests_processing", "waiting": "llamacpp:requests_deferred"})
    d = run(tl, max_concurrency=16, slots=4)
    assert d.top.id == "scheduler-cap" and d.top.confidence == 0.9
    assert "running sits at llama.cpp's 4 slots (--parallel 4, from its log)" in d.top.summary
    assert d.top.next.startswith("Raise --parallel from 4 (e.g. to 8) and --ctx-size with it")
    assert d.top.evidence["slots"] == 4
    assert not any("not known" in line for line in d.not_checked)
    # below a known cap of 8 slots, 4 running is not the slot cap (and no plateau is guessed)
    assert "scheduler-cap" not in [v.id for v in run(tl, max_concurrency=16, slots=8).verdicts]


def test_slots_are_read_from_the_results_memory_report():
    from servelab.diagnose.evidence import facts_from_result

    result = {"servelab": {"engine": {"memory_report": {"slots": 4, "kv_cache_tokens": 4096}}}}
    assert facts_from_result(result).slots == 4


def test_client_cap_equal_to_the_engine_cap_is_flagged():
    tl = make_timeline(client=client_at(8), engine=engine_at(8, 0))
    ev = evidence(RunFacts(max_concurrency=8, max_num_seqs=8), tl)
    v = client_concurrency_cap(ev)
    assert v.confidence == pytest.approx(0.6) and "max_num_seqs is 8 too" in v.summary


def test_a_queue_at_the_engine_vetoes_the_client_cap():
    tl = make_timeline(client=client_at(32), engine=engine_at(4, 28))
    assert client_concurrency_cap(evidence(RunFacts(max_concurrency=32), tl)) is None


def test_ties_rank_in_the_documented_order():
    from servelab.diagnose.verdict import Verdict, ranked

    vs = ranked([Verdict("scheduler-cap", 0.7, ""), Verdict("client-bound", 0.7, ""), Verdict("kv-capacity", 0.9, "")])
    assert [v.id for v in vs] == ["kv-capacity", "client-bound", "scheduler-cap"]


def test_bandwidth_share_counts_each_gpus_shard_and_names_resolve_most_specific_first():
    from servelab.diagnose.gpu import peak_tbs

    assert [peak_tbs(n) for n in ("NVIDIA GH200 480GB", "NVIDIA H200", "NVIDIA H20", "NVIDIA A100-SXM4-80GB",
                                  "NVIDIA A10G", "Tesla T4", "Some GPU")] == [4.0, 4.8, 4.0, 2.039, 0.6, 0.32, None]
    tl = make_timeline(client=client_at(64), engine=engine_at(16, 0, kv=0.5), gpu=_gpu(97, 72, 620.0),
                       gpu_devices=[H200])
    # the 69 % of the one-GPU case, split over 2 GPUs: 35 %, below the 40 % bar
    assert "memory-bandwidth-bound" not in verdict_ids(tl, output_throughput=3100.0, weights_gib=16.0,
                                                       tensor_parallel=2)


def test_an_idle_gpu_beside_an_engine_elsewhere_is_not_the_engines():
    """Found on a lent H200: a CPU engine (here the mock) beside an idle GPU was diagnosed
    gpu-underutilized. A GPU holding no memory and computing nothing while requests were in flight
    is not the engine's; the rule is not checked, and says why."""
    idle = lambda i: [{"util": 0, "mem_util": 0, "mem_used_gib": 0.6, "power_w": 80.0, "energy_j": 1000.0 + 20 * i}]
    tl = make_timeline(client=client_at(8, waiting=6), engine=engine_at(2, 6), gpu=idle, gpu_devices=[H200])
    d = run(tl)
    assert "gpu-underutilized" not in [v.id for v in d.verdicts] and d.top.id == "scheduler-cap"
    assert any("GPU (NVML): NVML sees 1 GPU(s); none held over 10% of its memory or computed while requests "
               "were in flight: the engine is not on them" in line for line in d.not_checked)


def test_a_small_engine_that_computes_on_the_gpu_is_the_gpus_even_with_little_memory():
    """llama.cpp with a small model holds a few GiB of 140: its GPU computed, so it is the engine's."""
    small = lambda i: [{"util": 12, "mem_util": 3, "mem_used_gib": 2.0, "power_w": 150.0}]
    tl = make_timeline(client=client_at(2), engine=engine_at(2, 0), gpu=small, gpu_devices=[H200])
    assert verdict_ids(tl) == ["gpu-underutilized"]


def test_a_hot_gpu_under_a_pinned_batch_is_the_cap_not_the_bandwidth():
    """Issue 34 item 1's GPU analogue: the same hot GPU, with running pinned at max_num_seqs 16 and
    requests waiting — every decode step re-reads the weights for only 16, and a larger batch
    spreads that read: the cap is the first limit, not the bytes per token."""
    tl = make_timeline(client=client_at(64), engine=engine_at(16, 5, kv=0.5), gpu=_gpu(97, 72, 620.0),
                       gpu_devices=[H200])
    ids = verdict_ids(tl, output_throughput=3100.0, weights_gib=16.0, max_num_seqs=16)
    assert ids[0] == "scheduler-cap" and "memory-bandwidth-bound" not in ids
    unpinned = make_timeline(client=client_at(16), engine=engine_at(16, 0, kv=0.5), gpu=_gpu(97, 72, 620.0),
                             gpu_devices=[H200])  # running below max_num_seqs 64, nothing waiting
    assert verdict_ids(unpinned, output_throughput=3100.0, weights_gib=16.0, max_num_seqs=64)[0] == \
        "memory-bandwidth-bound"


def test_a_timeline_with_no_sample_in_flight_is_not_judged():
    """Issue 34 item 4: no engine sample and no client sample with work in it — a verdict there would be
    about nothing: it says it cannot judge, and why, and asks for no more load."""
    d = run(make_timeline(client=client_at(0), engine_absent="unreachable (refused)"), max_concurrency=8)
    assert [v.id for v in d.verdicts] == ["not-judged"] and d.top.level == "low"
    assert "Cannot judge" in d.top.summary and "engine /metrics: unreachable (refused)" in d.top.summary
    assert "offered load" not in d.top.next and "telemetry" in d.top.next


def _starved_scrapes(i: int) -> dict:
    """CI's failing run, in ticks: 32 in flight at max_num_seqs 2 for 45 s, every scrape timed out
    while the queue stood, and the only answers came in the last second — the drain, one running."""
    return {"error": "timed out"} if i < 176 else {"running": 1.0, "waiting": 0.0, "kv_usage": 0.01}


def test_engine_samples_from_a_sliver_of_the_run_are_not_read_as_its_state():
    """A handful of answers from the drain is not the engine's state for a run whose scrapes failed
    the rest of the time: read as one, the queue of 30 disappeared and the client's cap was blamed."""
    tl = make_timeline(n=180, client=lambda i: {"in_flight": 32 if i < 176 else 1, "waiting": 22 if i < 176 else 0,
                                                "cpu": 0.02, "lag_ms": 0.2},
                       engine=_starved_scrapes)
    d = run(tl, max_concurrency=32, max_num_seqs=2)
    assert d.top.id == "scheduler-cap" and d.top.evidence["inferred_from"] == "client in flight"
    reason = ("engine /metrics: its samples cover 4% of the 45.0 s with requests in flight (4 answered, 176 scrapes"
              " failed: timed out; longest gap between answers 44.0 s)")
    assert reason in d.not_checked
    assert "client-concurrency-cap" not in [v.id for v in d.verdicts[:1]]


def test_slow_but_regular_answers_still_stand_for_the_run():
    """One answer a second (a starved API server answering late) covers every tick within a second of
    one: the engine's own gauges are judged, at full confidence. One answer in 4 s still covers more
    than half the ticks (9 of 16); one in 5 s does not (9 of 20)."""
    def every(k):
        return lambda i: {"running": 2.0, "waiting": 30.0, "kv_usage": 0.02} if i % k == 0 else {"error": "timed out"}

    def judged(k):
        return run(make_timeline(n=120, client=client_at(32, waiting=22), engine=every(k)), max_concurrency=32, max_num_seqs=2).top

    assert [judged(k).confidence for k in (4, 16)] == [pytest.approx(0.9)] * 2
    assert judged(4).evidence["waiting_median"] == 30 and "inferred_from" not in judged(16).evidence
    assert judged(20).evidence["inferred_from"] == "client in flight"
