"""Fitting the step model: exact on synthetic telemetry, non-negative on noisy, steps from llama.cpp's counter."""

import pytest

from servelab.errors import InputError
from servelab.planner.calibrate import Interval, error, fit, intervals


def samples(running, tokens_per_s, decode_calls_per_s=None, n=6, prompt_per_s=0.0):
    out = []
    for k in range(n):
        s = {"t_ms": k * 500.0, "running": running, "generation_tokens": k * 0.5 * tokens_per_s,
             "prompt_tokens": k * 0.5 * prompt_per_s}
        if decode_calls_per_s is not None:
            s["decode_calls"] = k * 0.5 * decode_calls_per_s
        out.append(s)
    return out


def test_steps_from_running_or_from_llamacpps_decode_counter():
    [first, *_] = intervals(samples(4.0, 200.0))
    assert first == Interval(dt_s=0.5, steps=25.0, generated=100.0, prompt=0.0)
    assert intervals(samples(4.0, 200.0, decode_calls_per_s=40.0))[0].steps == 20.0


def test_idle_intervals_are_left_out():
    assert intervals(samples(0.0, 0.0)) == []


def test_recovers_the_costs_it_was_built_from():
    # step = 5 ms + 1 ms per running sequence, plus 0.1 ms per prompt token
    data = []
    for running, prompt in ((1, 0), (2, 40), (4, 10), (8, 100), (16, 0)):
        steps = 100
        dt = steps * (0.005 + 0.001 * running) + prompt * 0.0001
        data.append(Interval(dt, steps, steps * running, prompt))
    model = fit(data, weight_read_s=0.002)
    assert model.overhead_s == pytest.approx(0.003)
    assert model.per_seq_s == pytest.approx(0.0009)
    assert model.per_token_s == pytest.approx(0.0001)
    assert error(model, data) == pytest.approx(0.0, abs=1e-9)


def test_no_cost_comes_out_negative():
    data = [Interval(1.0, 10, 10, 500), Interval(1.0, 10, 10, 0), Interval(2.0, 20, 20, 0)]
    model = fit(data, weight_read_s=0.0)
    assert min(model.overhead_s, model.per_token_s) >= 0


def test_too_little_telemetry_is_one_line():
    with pytest.raises(InputError, match="at least 3 loaded telemetry intervals, got 1"):
        fit([Interval(1.0, 1, 1, 0)], 0.0)


def test_tpot_is_read_where_the_runs_measured_it_not_from_the_line():
    from servelab.planner.calibrate import tpot_at
    from servelab.planner.speed import StepModel

    # a line fitted to loaded runs that says 37 ms at batch 1, where batch 1 measured 19 ms
    model = StepModel(overhead_s=0.026, per_seq_s=0.001, per_token_s=0.0, weight_read_s=0.010)
    loads = ((1, 0.019), (4, 0.031), (8, 0.044))
    assert model.step_s(1, 1) == pytest.approx(0.037)
    assert [(t.how, round(t.seconds, 6)) for t in (tpot_at(model, loads, b) for b in (1, 6, 32))] == [
        ("measured", 0.019), ("interpolated", 0.0375), ("extrapolated", 0.068)]  # 44 ms + 24 × 1 ms


def test_measured_loads_are_step_time_per_running_count():
    from servelab.planner.calibrate import measured_loads

    data = [Interval(0.5, 25.0, 25.0, 0.0), Interval(0.5, 20.0, 20.0, 0.0), Interval(0.5, 10.0, 40.0, 0.0)]
    assert measured_loads(data) == ((1, 1.0 / 45), (4, 0.05))


def test_the_runs_served_context_comes_from_the_result_beside_the_timeline(tmp_path):
    import json

    from servelab.planner.calibrate import load_runs, runs_max_model_len
    from servelab.telemetry.timeline import Timeline, write

    for name, engine in (("a", {"memory_report": {"max_concurrency_tokens": 2048}}),
                         ("b", {"args": ["--max-model-len", "4096"], "memory_report": {}}), ("c", None)):
        engine_samples = [{**s, "src": "engine"} for s in samples(4.0, 200.0)]
        timeline = Timeline({"servelab_timeline": 1, "duration_s": 3.0}, engine_samples)
        write(timeline, tmp_path / f"{name}.timeline.jsonl")
        if engine is not None:
            (tmp_path / f"{name}.json").write_text(json.dumps({"servelab": {"engine": engine}}))
    runs = load_runs([tmp_path])
    assert [r.max_model_len for r in runs] == [2048, 4096, None] and runs_max_model_len(runs) == 4096


def test_the_least_squares_keeps_every_term_non_negative_and_honours_the_weights():
    """The one non-negative least squares (calibrate's fit and the offline corpus fit both use it):
    unconstrained, x = (1, -1); the best with x >= 0 drops the second term, x1 = 1/2; weighting the
    third row 10x pulls x1 to 1/101."""
    import numpy as np

    from servelab.planner.calibrate import nonnegative_least_squares

    a, b = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), np.array([1.0, -1.0, 0.0])
    assert np.linalg.lstsq(a, b, rcond=None)[0] == pytest.approx([1.0, -1.0])
    assert nonnegative_least_squares(a, b).tolist() == pytest.approx([0.5, 0.0])
    assert nonnegative_least_squares(a, b, np.array([1.0, 1.0, 10.0])).tolist() == pytest.approx([1 / 101, 0.0])
    assert nonnegative_least_squares(a, -np.abs(b) - 1).tolist() == [0.0, 0.0]  # nothing >= 0 beats zero
