from servelab.planner.gpus import GPUS, find_gpu


def test_every_gpu_asked_for_is_in_the_table():
    for name in ("A10", "L4", "A40", "L40S", "A100-40GB", "A100-80GB", "H100", "H200", "B200", "MI300X",
                 "RTX4090", "cpu"):
        assert name in GPUS


def test_names_match_loosely():
    assert find_gpu("a100_80gb") is GPUS["A100-80GB"]
    assert find_gpu("rtx 4090") is GPUS["RTX4090"]
    assert find_gpu("A100") is GPUS["A100-80GB"]
    assert find_gpu("X100") is None


def test_fp8_peak_only_where_the_tensor_cores_have_it():
    assert GPUS["H100"].tflops(fp8=True) == 1979
    assert GPUS["A100-80GB"].tflops(fp8=True) == 312  # no fp8: weights are upcast
