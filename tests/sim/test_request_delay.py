"""The API server's per-request cost: a request reaches the simulated engine that much after it
was sent, in the fast mode and in the sim server alike."""

import pytest

from servelab.errors import InputError
from servelab.sim.model import EngineLimits, SimRequest, StepModel
from servelab.sim.simulate import simulate

LIMITS = EngineLimits(max_num_seqs=4, max_num_batched_tokens=512, num_blocks=256, block_size=16)


def test_a_request_waits_the_api_cost_before_its_first_step():
    plain = StepModel(overhead_s=0.01, per_seq_s=0.0, per_token_s=0.0)
    held = StepModel(overhead_s=0.01, per_seq_s=0.0, per_token_s=0.0, request_s=0.003)
    requests = [SimRequest(0, 100, 5), SimRequest(50_000_000, 100, 5)]
    a, b = simulate(requests, LIMITS, plain), simulate(requests, LIMITS, held)
    for x, y in zip(a.emissions, b.emissions):
        assert y.sent_ns == x.sent_ns
        assert [t - 3_000_000 for t in y.token_ns] == x.token_ns  # the whole request moves by 3 ms


def test_requests_sent_during_a_step_join_the_step_after_their_delay():
    """Two requests 1 ms apart, each held 3 ms: the first is seen at 3 ms and prefilled by 13 ms;
    the second, seen at 4 ms during that step, is prefilled in the next one (13 -> 23 ms)."""
    held = StepModel(overhead_s=0.01, per_seq_s=0.0, per_token_s=0.0, request_s=0.003)
    got = simulate([SimRequest(0, 100, 2), SimRequest(1_000_000, 100, 2)], LIMITS, held).emissions
    assert got[0].token_ns[0] == 13_000_000  # seen at 3 ms, one 10 ms step
    assert got[1].token_ns[0] == 23_000_000  # seen at 4 ms, prefilled in the next step (13 -> 23 ms)


def test_a_negative_request_cost_is_refused():
    with pytest.raises(InputError, match="request_s must be >= 0"):
        StepModel(request_s=-1.0)


def test_the_flag_reaches_both_modes():
    import argparse

    from servelab.sim.options import add_engine_arguments, from_args, to_argv

    parser = argparse.ArgumentParser()
    add_engine_arguments(parser, "sim-")
    _, model = from_args(parser.parse_args(["--sim-step-request-ms", "3.5"]))
    assert model.request_s == pytest.approx(0.0035)
    argv = to_argv(EngineLimits(), model)
    assert argv[argv.index("--step-request-ms") + 1] == repr(3.5)
