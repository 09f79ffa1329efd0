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
