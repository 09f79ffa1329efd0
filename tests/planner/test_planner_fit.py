"""A plan that does not fit: each way out is checked by planning it, and is the limit (one step more fails)."""

import dataclasses

import pytest

from servelab.errors import InputError
from servelab.planner import GPUS, PlanSpec, find_model, make_plan
from servelab.planner.fit import require_fit, ways_out

QWEN8 = find_model("Qwen3-8B")


def test_the_longest_context_that_fits_is_the_limit():
    spec = PlanSpec(model=QWEN8, gpu=GPUS["L4"], max_model_len=131072)
    flag, value = ways_out(spec)[-1].split()
    limit = int(value)  # moves with the fitted non-KV model (planner/nonkv.py); the property below does not
    assert flag == "--max-model-len" and limit % 16 == 0 and 16_384 < limit < 131_072
    at_limit = make_plan(dataclasses.replace(spec, max_model_len=limit))
    one_block_more = make_plan(dataclasses.replace(spec, max_model_len=limit + 1))
    assert (at_limit.fits, at_limit.requests_at_once, one_block_more.fits) == (True, 1, False)


def test_the_smallest_tp_that_fits_is_offered_and_keeps_an_explicit_tp_flag():
    spec = PlanSpec(model=find_model("Llama-3.1-70B-Instruct"), gpu=GPUS["H100"], gpu_count=2, tensor_parallel=2)
    assert ways_out(spec)[0] == "--gpu H100:4 --tensor-parallel-size 4 (TP 4)"
    assert not make_plan(spec).fits


def test_llamacpp_ways_out_are_gguf_types_and_a_ctx_size():
    spec = PlanSpec(model=find_model("Qwen3-32B"), gpu=GPUS["RTX4090"], engine="llamacpp")
    assert ways_out(spec) == ["--quantization Q5_K_M --ctx-size 11931", "--quantization Q4_K_M --ctx-size 27182"]
    assert make_plan(dataclasses.replace(spec, quantization="Q4_K_M", ctx_size=27182)).fits
    assert not make_plan(dataclasses.replace(spec, quantization="Q4_K_M", ctx_size=27183)).fits


def test_no_way_out_is_said_so():
    cpu = dataclasses.replace(GPUS["cpu"], memory_gib=10.0)
    spec = PlanSpec(model=QWEN8, gpu=cpu, max_model_len=40960, cpu_kv_space_gib=20)
    with pytest.raises(InputError, match="exceed the 10.00 GiB there; no larger TP, smaller quantization or "
                                         "shorter context makes it fit$"):
        require_fit(make_plan(spec))


def test_a_plan_that_fits_passes():
    require_fit(make_plan(PlanSpec(model=QWEN8, gpu=GPUS["H100"])))
