"""Calibrating the simulator by replaying runs: exact where the runs came from a known step
model, errors judged against the repeats' range, extrapolation said, limits read from the result."""

import dataclasses
import json

import pytest

from servelab.errors import InputError
from servelab.planner.calibrate import calibrate_replay
from servelab.planner.replay import Observed, engine_limits, load_observed, range_error, replay
from servelab.sim.model import EngineLimits, SimRequest, StepModel

TRUTH = StepModel(overhead_s=0.015, per_seq_s=0.0005, per_token_s=0.0003, source="truth")
START = StepModel(overhead_s=0.005, per_seq_s=0.0, per_token_s=0.001, source="roofline")


def run(name: str, seqs: int, conc: int, n: int, prompt: int = 64, model: StepModel = TRUTH,
        scale: float = 1.0) -> Observed:
    """A run 'measured' on an engine whose steps are exactly ``model``'s (× ``scale`` on each figure)."""
    limits = EngineLimits(max_num_seqs=seqs, num_blocks=64, block_size=128)
    requests = tuple(SimRequest(0, prompt, 16) for _ in range(n))  # short: the fit replays them ~300 times
    shell = Observed(name, f"seqs {seqs} conc {conc} n {n} prompt {prompt}", requests, conc, limits, {})
    measured = {k: v * scale for k, v in replay(shell, model).items()}
    return Observed(name, shell.point, requests, conc, limits, measured)


def test_the_fit_finds_the_step_model_the_runs_came_from_and_predicts_the_held_out():
    fitted = [run("c1", 128, 1, 4), run("c4", 128, 4, 8), run("c16", 128, 16, 16), run("s2c8", 2, 8, 8)]
    held = [run("c8", 128, 8, 12), run("s4c8", 4, 8, 12)]
    result = calibrate_replay(fitted, held, START, iterations=150)
    m = result.model
    assert (m.overhead_s, m.per_seq_s, m.per_token_s) == pytest.approx((0.015, 0.0005, 0.0003), rel=0.02)
    assert all(abs(result.error(p, key)) < 0.01 for p in result.held_out
               for key in ("output_throughput", "median_tpot_ms", "mean_ttft_ms"))
    assert result.warnings() == []


def test_a_held_out_load_outside_those_fitted_is_called_extrapolated():
    result = calibrate_replay([run("c1", 128, 1, 8), run("c4", 128, 4, 8)],
                              [run("c16", 128, 16, 32), run("long", 128, 2, 8, prompt=512)], START, iterations=20)
    assert result.warnings() == [
        "seqs 128 conc 16 n 32 prompt 64: extrapolated: batch 16 outside the batches fitted (1–4)",
        "seqs 128 conc 2 n 8 prompt 512: extrapolated: prompts of 512 tokens outside those fitted (64–64)"]


def test_repeats_are_one_point_and_the_error_is_against_their_range():
    repeats = [run("a", 128, 4, 16, scale=s) for s in (0.9, 1.0, 1.2)]
    result = calibrate_replay(repeats[:1], repeats, TRUTH, iterations=0)
    [point] = result.held_out
    assert len(point.runs) == 3 and result.error(point, "median_tpot_ms") == 0.0  # truth lies inside 0.9–1.2
    assert range_error(1.3, [0.9, 1.0, 1.2]) == pytest.approx(0.1 / 1.2)
    assert range_error(0.45, [0.9, 1.2]) == pytest.approx(-0.5)


def test_limits_come_from_the_results_engine_section_else_the_plans():
    fallback = EngineLimits(max_num_seqs=256, max_num_batched_tokens=8192, num_blocks=100, block_size=16)
    engine = {"args": ["--max-num-seqs", "4"], "memory_report": {"kv_cache_tokens": 46592, "block_size": 128}}
    got = engine_limits(engine, fallback)
    assert (got.max_num_seqs, got.max_num_batched_tokens, got.kv_tokens, got.block_size) == (4, 8192, 46592, 128)
    assert engine_limits({}, fallback) == fallback


def test_a_simulated_run_or_a_run_without_records_is_one_line(tmp_path):
    fallback = EngineLimits()
    result = {"output_throughput": 1.0, "median_tpot_ms": 1.0, "mean_ttft_ms": 1.0, "completed": 1,
              "servelab": {"simulated": {"mode": "fast"}}}
    (tmp_path / "r.json").write_text(json.dumps(result))
    (tmp_path / "r.records.jsonl").write_text(json.dumps(
        {"prompt_len": 8, "output_tokens": 4, "intended_send_ms": 0.0, "error": None}) + "\n")
    with pytest.raises(InputError, match=r"r.json: a simulated run; calibrate on measured runs only$"):
        load_observed([tmp_path], fallback)
    (tmp_path / "r.records.jsonl").unlink()
    with pytest.raises(InputError, match="no results with per-request records in"):
        load_observed([tmp_path], fallback)
    assert load_observed([tmp_path], fallback, required=False) == []


def test_the_starts_per_request_cost_is_kept_and_the_step_costs_found_beside_it():
    """Runs from an engine whose API server holds each request 20 ms: calibrated from a start that
    knows that delay, the fit keeps it and finds the step costs (without it they would absorb it)."""
    truth = dataclasses.replace(TRUTH, request_s=0.02)
    fitted = [run("c1", 128, 1, 4, model=truth), run("c4", 128, 4, 8, model=truth),
              run("c16", 128, 16, 16, model=truth), run("s2c8", 2, 8, 8, model=truth)]
    result = calibrate_replay(fitted, [], dataclasses.replace(START, request_s=0.02), iterations=150)
    m = result.model
    assert m.request_s == 0.02
    assert (m.overhead_s, m.per_seq_s, m.per_token_s) == pytest.approx((0.015, 0.0005, 0.0003), rel=0.02)


def test_a_start_with_its_weight_read_apart_searches_from_the_read_folded_into_the_overhead():
    """The planner's step models keep the weight read as read_s; the search adds its costs, so it starts
    from overhead + read: with iterations=0 the model found is that start, nothing dropped."""
    start = dataclasses.replace(START, overhead_s=0.002, read_s=0.013)
    result = calibrate_replay([run("c1", 128, 1, 4)], [], start, iterations=0)
    m = result.model
    assert m.overhead_s == pytest.approx(0.015) and m.read_s == 0.0
    assert (m.per_seq_s, m.per_token_s) == (START.per_seq_s, START.per_token_s)
