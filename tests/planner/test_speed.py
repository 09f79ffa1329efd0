import pytest

from servelab.planner.gpus import Gpu
from servelab.planner.speed import StepModel, speed_floor

GPU = Gpu("test", 80, 2000, 1000)  # 2 TB/s, 1 PFLOP/s


def test_roofline_numbers():
    floor = speed_floor(16_000_000_000, 8e9, GPU, fp8=False)
    assert floor.tpot_batch1_s == pytest.approx(0.008)           # 16 GB / 2 TB/s
    assert floor.prefill_per_1k_s == pytest.approx(0.016)        # 2 × 8e9 × 1000 / 1e15
    assert floor.compute_bound_batch == pytest.approx(500)       # 0.008 s / 16 µs per token


def test_without_a_flops_figure_only_the_bandwidth_floor():
    floor = speed_floor(16_000_000_000, 8e9, Gpu("x", 80, 2000, 0.0), fp8=False)
    assert (floor.compute_bound_batch, floor.prefill_per_1k_s) == (None, None)


def test_step_model_adds_its_costs():
    step = StepModel(overhead_s=0.002, per_seq_s=0.0001, per_token_s=0.00001, weight_read_s=0.008)
    assert step.step_s(running=10, tokens=100) == pytest.approx(0.002 + 0.001 + 0.001 + 0.008)
