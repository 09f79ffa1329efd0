"""A simulated MoE run's step model, as the report's methodology describes it."""

from servelab.reports.methodology import _read_text


def test_the_methodology_names_the_moe_kernels_of_a_simulated_moe_run_and_nothing_for_a_dense_one():
    dense = {"read_s": 0.002, "overlap": 1.0}
    moe = {**dense, "expert_read_s": 0.00004, "expert_token_s": 0.000002, "experts": 128, "active_experts": 8}
    assert _read_text(dense) == ", weight read 2 ms added to the per-token compute"
    assert "0.04 ms per expert its tokens pick (8 of 128 each, overlapping their 0.002 ms a token)" in _read_text(moe)
