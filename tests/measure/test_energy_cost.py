"""Energy and cost per token from NVML samples (the fake pynvml of tests/telemetry/test_nvml.py),
with known numbers: two GPUs for 10 s, one with the total-energy counter at 300 W, one
without it at 500 W (its power integrated), 4,000 output tokens of 5,000."""

from __future__ import annotations

import sys

import pytest

from servelab.measure import energy_cost
from servelab.metrics.energy import COUNTER, POWER, cost, cumulative_j, joules_between, per_token
from servelab.metrics.summary import Summary
from servelab.telemetry import gpu
from servelab.telemetry.timeline import Timeline
from telemetry.test_nvml import NVMLError, fake_pynvml

SUMMARY = Summary(completed=100, failed=0, duration_s=10.0, total_input=1000, total_output=4000,
                  request_throughput=10.0, request_goodput=None, output_throughput=400.0,
                  total_token_throughput=500.0, max_output_tokens_per_s=500.0, max_concurrent_requests=8)
STEADY = {"plateau": True, "start_s": 2.0, "end_s": 6.0, "output_tokens": 2000, "prompt_tokens": 500}


def sampled_timeline(monkeypatch) -> Timeline:
    """Samples each second from t0 − 0.5 s to t0 + 10.5 s, read through telemetry/gpu.py."""
    clock = {"t": 0.0}
    fake = fake_pynvml(count=2)
    fake.nvmlDeviceGetPowerUsage = lambda h: 300_000 if h == "h0" else 500_000

    def energy(h):
        if h == "h1":
            raise NVMLError("Not Supported")
        return round(7_000_000 + 300_000 * clock["t"])  # mJ: 300 W since some time before the run

    fake.nvmlDeviceGetTotalEnergyConsumption = energy
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    gpus, _ = gpu.open_gpus()
    samples = []
    for i in range(12):
        clock["t"] = i - 0.5
        samples.append({"t_ms": clock["t"] * 1000, "src": "gpu", "devices": gpus.sample()})
    header = {"duration_s": 10.0, "gpu": {"status": "ok", "devices": gpus.devices}}
    return Timeline(header, samples)


def test_joules_per_token_and_cost_with_known_numbers(monkeypatch):
    e = energy_cost.energy_section(sampled_timeline(monkeypatch), SUMMARY, STEADY, 3.60, simulated=False)
    assert e["gpus"] == 2 and e["source"] == f"{COUNTER} and {POWER}"
    run, plateau = e["run"], e["steady_state"]
    assert run["joules"] == pytest.approx(8000.0) and run["avg_power_w"] == pytest.approx(800.0)
    assert run["j_per_output_token"] == pytest.approx(2.0) and run["output_tokens_per_j"] == pytest.approx(0.5)
    assert plateau["joules"] == pytest.approx(3200.0) and plateau["j_per_output_token"] == pytest.approx(1.6)
    # $3.60 × 2 GPUs × 10 s = $0.02 over 4,000 output / 5,000 total tokens; the window: $0.008, 2,000 / 2,500
    c = e["cost"]
    assert c["run"]["dollars"] == pytest.approx(0.02) and c["run"]["gpu_hours"] == pytest.approx(20 / 3600)
    assert c["run"]["per_million_output_tokens"] == pytest.approx(5.0)
    assert c["run"]["per_million_total_tokens"] == pytest.approx(4.0)
    assert c["steady_state"]["per_million_output_tokens"] == pytest.approx(4.0)
    assert c["steady_state"]["per_million_total_tokens"] == pytest.approx(3.2)
    lines = energy_cost.lines(e)
    assert lines[0].startswith(f"servelab: energy ({COUNTER} and {POWER}, 2 GPU): run 8000.0 J, 800.0 W average, "
                               "2 J/output token, 0.5 tokens/J; steady state 3200.0 J")
    assert lines[1].endswith("run $5 per 1M output tokens, $4 per 1M total; steady state $4 per 1M output tokens, "
                             "$3.2 per 1M total")


def test_no_gpu_is_one_line_not_zeros():
    header = {"duration_s": 10.0, "gpu": {"status": "absent", "detail": "NVML found no GPU", "devices": []}}
    e = energy_cost.energy_section(Timeline(header, []), SUMMARY, STEADY, 2.5, simulated=False)
    assert (e["gpus"], e["run"], e["cost"], e["nvml"]) == (0, None, None, "NVML found no GPU")
    assert energy_cost.lines(e) == ["servelab: energy and cost: no GPU (NVML saw none; the result's energy.nvml "
                                    "says why) — no joules, and --gpu-hour-cost 2.5 prices no GPU-hour (NVML: "
                                    "NVML found no GPU)"]
    unpriced = energy_cost.energy_section(Timeline(header, []), SUMMARY, STEADY, None, simulated=False)
    assert energy_cost.lines(unpriced) == ["servelab: energy and cost: no GPU (NVML saw none; the result's "
                                           "energy.nvml says why) — no joules or cost per token"]


def test_a_span_outside_the_samples_has_no_joules():
    series = cumulative_j([0.0, 1.0, 2.0], [None, None, None], [100.0, 200.0, None])  # power only, 2 usable
    assert series[2] == POWER and joules_between(series, 0.0, 1.0) == 150.0
    assert joules_between(series, 0.5, 1.0) == pytest.approx(75.0)  # linear between samples
    assert joules_between(series, 0.0, 1.5) is None and cumulative_j([0.0], [5.0], [1.0]) is None


def test_arithmetic_edges():
    assert per_token(None, 10.0, 5) is None and per_token(100.0, 10.0, 0)["j_per_output_token"] is None
    assert cost(2.0, 1, 3600.0, 0, 0) == {"gpu_hours": 1.0, "dollars": 2.0, "per_million_output_tokens": None,
                                          "per_million_total_tokens": None}


def _two_gpus(first: dict, second: dict) -> Timeline:
    """Two H200s over a 10 s run with requests in flight throughout: each sample's fields as given,
    the counter rising at each GPU's power."""
    devices = [{"index": i, "name": "NVIDIA H200", "memory_total_gib": 139.8, "power_limit_w": 700.0}
               for i in range(2)]
    samples = []
    for i in range(12):
        t = i - 0.5
        samples.append({"t_ms": t * 1000, "src": "client", "in_flight": 4, "waiting": 0, "cpu": 0.1, "lag_ms": 0.1})
        rows = [{**f, "energy_j": 5000.0 + f["power_w"] * t} for f in (first, second)]
        samples.append({"t_ms": t * 1000 + 1, "src": "gpu", "devices": rows})
    return Timeline({"duration_s": 10.0, "gpu": {"status": "ok", "devices": devices}}, samples)


IDLE = {"util": 0, "mem_used_gib": 0.6, "power_w": 80.0}
ENGINE = {"util": 90, "mem_used_gib": 125.0, "power_w": 600.0}


def test_only_the_engines_gpu_draws_the_runs_energy():
    """An idle GPU beside the engine's: its 80 W are not the run's (the engine's GPU: 600 W x 10 s)."""
    e = energy_cost.energy_section(_two_gpus(IDLE, ENGINE), SUMMARY, STEADY, 3.60, simulated=False)
    assert e["gpus"] == 1 and e["run"]["joules"] == pytest.approx(6000.0, rel=1e-3)
    assert e["cost"]["run"]["gpu_hours"] == pytest.approx(10 / 3600)


def test_no_gpu_the_engine_used_is_one_line_not_an_idle_gpus_joules():
    """Found on a lent H200: a mock engine beside an idle GPU was charged the GPU's 80 W."""
    e = energy_cost.energy_section(_two_gpus(IDLE, IDLE), SUMMARY, STEADY, 3.60, simulated=False)
    assert (e["gpus"], e["run"], e["cost"]) == (0, None, None)
    assert energy_cost.lines(e) == [
        "servelab: energy and cost: no GPU the engine used (NVML sees 2 GPU(s); none held over 10% of its memory "
        "or computed while requests were in flight: the engine is not on them) — no joules, and --gpu-hour-cost "
        "3.6 prices no GPU-hour"]


def test_a_run_shorter_than_a_tick_is_judged_by_the_samples_around_it():
    """A 77 ms run between two GPU samples (a golden study's, with an idle GPU): none inside the
    run, so the bracketing samples say the GPU was idle, not 'NVML cannot tell'."""
    devices = [{"index": 0, "name": "NVIDIA H200", "memory_total_gib": 140.4, "power_limit_w": 700.0}]
    samples = [{"t_ms": t, "src": "gpu", "devices": [{**IDLE, "energy_j": 1000.0 + 0.08 * t}]} for t in (-15.0, 250.0)]
    header = {"duration_s": 0.077, "gpu": {"status": "ok", "devices": devices}}
    e = energy_cost.energy_section(Timeline(header, samples), SUMMARY, STEADY, None, simulated=False)
    assert e["gpus"] == 0 and e["run"] is None and "the engine is not on them" in e["why"]


def test_a_gpu_nvml_cannot_read_is_counted_beside_the_engines_and_an_idle_one_is_not():
    """Three GPUs: one NVML reads neither memory nor utilization of (counted: nothing tells it is not the
    engine's), the engine's, and an idle one (not counted)."""
    from servelab.telemetry.summary import engine_gpus

    devices = [{"index": i, "name": "GPU", "memory_total_gib": 80.0} for i in range(3)]
    unread = {"util": None, "mem_used_gib": None, "power_w": 100.0}
    samples = [{"t_ms": 0.5, "src": "client", "in_flight": 2, "waiting": 0, "cpu": 0.1, "lag_ms": 0.1},
               {"t_ms": 1.0, "src": "gpu", "devices": [unread, ENGINE, IDLE]}]
    timeline = Timeline({"duration_s": 1.0, "gpu": {"status": "ok", "devices": devices}}, samples)
    assert engine_gpus(timeline) == ([0, 1], None)


def test_without_telemetry_the_cost_says_it_counts_every_gpu_nvml_sees(monkeypatch):
    monkeypatch.setattr(energy_cost, "gpu_devices", lambda: [{"index": 0}, {"index": 1}])
    e = energy_cost.energy_section(None, SUMMARY, STEADY, 2.0, simulated=False)
    assert e["gpus"] == 2 and "cost counts every GPU NVML sees" in e["why"]
