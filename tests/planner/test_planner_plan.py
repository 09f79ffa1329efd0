"""Whole plans: vLLM on a GPU, vLLM's CPU build, llama.cpp; weights by quantization; bad input."""

import dataclasses

import pytest

from servelab.errors import InputError
from servelab.planner import GPUS, MODELS, PlanSpec, find_model, make_plan
from servelab.planner.budget import OtherMemory, estimate_other, vllm_gpu_budget
from servelab.planner.nonkv import NonKvConstants
from servelab.planner.plan import default_batch, weights_bytes

GIB = 2**30
SMOL = find_model("SmolLM2-135M-Instruct")
CPU = dataclasses.replace(GPUS["cpu"], memory_gib=23.5)


def test_the_embedded_engine_plan():
    plan = make_plan(PlanSpec(model=SMOL, gpu=CPU, max_model_len=2048))
    report = plan.report()
    assert (report.kv_cache_tokens, report.num_gpu_blocks, report.block_size) == (46_592, 364, 128)
    assert (report.max_concurrency, report.max_concurrency_tokens, report.kv_cache_gib) == (22.75, 2048, 1.0)
    assert plan.weights_bytes == 134_515_008 * 2
    assert plan.requests_at_once == 22 and plan.other is None


def test_cpu_pool_follows_vllm_cpu_kvcache_space():
    plan = make_plan(PlanSpec(model=SMOL, gpu=CPU, max_model_len=2048, cpu_kv_space_gib=4))
    assert plan.pool.num_blocks == 4 * GIB // (128 * 23_040)  # 1456
    assert plan.kv_tokens == 1456 * 128


def test_gpu_budget_is_requested_minus_weights_minus_the_rest():
    other = OtherMemory(activations=GIB, non_torch=GIB // 4, cuda_graphs=GIB // 2)
    # ceil(80 GiB × 0.9) = 77,309,411,328 bytes
    assert vllm_gpu_budget(80 * GIB, 0.9, 16 * GIB, other) == 77_309_411_328 - 16 * GIB - other.total


def test_a_gpu_plan_rounds_its_budget_down_to_16_token_blocks():
    plan = make_plan(PlanSpec(model=find_model("Qwen3-14B"), gpu=GPUS["H100"], max_model_len=8192))
    assert plan.pool.block_size == 16
    assert plan.kv_tokens == plan.pool.num_blocks * 16
    assert plan.pool.num_blocks == plan.kv_budget_bytes // (16 * 160 * 1024)
    assert plan.fits and plan.requests_at_once == int(plan.max_concurrency)


def test_max_num_seqs_caps_requests_at_once():
    spec = PlanSpec(model=SMOL, gpu=CPU, max_model_len=2048, max_num_seqs=4)
    assert make_plan(spec).requests_at_once == 4


def test_vllm_batch_defaults_by_device_memory():
    model = find_model("Qwen3-8B")
    assert default_batch(PlanSpec(model=model, gpu=GPUS["H100"])) == (8192, 1024)
    assert default_batch(PlanSpec(model=model, gpu=GPUS["A100-80GB"])) == (2048, 256)
    assert default_batch(PlanSpec(model=model, gpu=GPUS["B200"])) == (16384, 1024)
    assert default_batch(PlanSpec(model=model, gpu=CPU)) == (2048, 128)


def test_a_70b_model_does_not_fit_one_l4():
    plan = make_plan(PlanSpec(model=find_model("Llama-3.1-70B-Instruct"), gpu=GPUS["L4"]))
    assert not plan.fits and plan.requests_at_once == 0 and plan.kv_tokens == 0


def test_tensor_parallel_splits_weights_and_multiplies_replicas():
    plan = make_plan(PlanSpec(model=find_model("Llama-3.1-70B-Instruct"), gpu=GPUS["H100"], gpu_count=8,
                              tensor_parallel=4, max_model_len=8192))
    assert plan.weights_per_gpu == plan.weights_bytes // 4 and plan.replicas == 2


def test_quantized_weights_keep_embeddings_at_16_bits():
    llama = find_model("Llama-3.1-8B-Instruct")
    embeddings = 2 * 128256 * 4096
    assert weights_bytes(llama, "fp8") == (llama.total_params - embeddings) + embeddings * 2
    assert weights_bytes(llama, "none") == llama.total_params * 2


def test_gguf_q4_1_weights_equal_the_shipped_files_tensors():
    # llama.cpp: "CPU_Mapped model buffer size = 92.10 MiB"; the file's tensors sum to 96,576,768 bytes
    assert weights_bytes(SMOL, "Q4_1") == 96_576_768


def test_llamacpp_kv_is_cells_times_bytes_per_token():
    # llama.cpp logs "llama_kv_cache: size = 180.00 MiB (8192 cells, 30 layers, 1/1 seqs)"
    plan = make_plan(PlanSpec(model=SMOL, gpu=CPU, engine="llamacpp", quantization="Q4_1"))
    assert plan.kv_budget_bytes == 180 * 2**20 and plan.kv_tokens == 8192
    four = make_plan(PlanSpec(model=SMOL, gpu=CPU, engine="llamacpp", ctx_size=4096, parallel=4))
    assert (four.report().slots, four.report().context_per_slot, four.requests_at_once) == (4, 1024, 4)
    # no --ctx-size: every slot gets the trained context (llama.cpp logged n_slots = 2, n_ctx_slot = 8192)
    two = make_plan(PlanSpec(model=SMOL, gpu=CPU, engine="llamacpp", parallel=2))
    assert (two.kv_tokens, two.report().context_per_slot) == (16384, 8192)


def test_activations_grow_with_the_token_budget():
    model = find_model("Llama-3.1-8B-Instruct")
    prior = NonKvConstants()  # hidden x 8 + FFN x 4 bytes per token: the pre-corpus estimate
    small, large = estimate_other(model, 2048, 256, 1, constants=prior), estimate_other(model, 8192, 256, 1,
                                                                                          constants=prior)
    assert large.activations - small.activations == 6144 * (4 * 4096 + 2 * 14336) * 2


@pytest.mark.parametrize("change, message", [
    ({"quantization": "q3_xyz"}, "unknown quantization 'q3_xyz'"),
    ({"kv_cache_dtype": "int3"}, "unknown KV cache dtype 'int3'"),
    ({"gpu_count": 3, "tensor_parallel": 2}, "--tensor-parallel-size 2 must divide the GPU count 3"),
    ({"gpu_count": 2}, "TP 2 does not split the 9 attention heads (3 KV heads) of HuggingFaceTB/SmolLM2-135M-Instruct "
                       "evenly, and vLLM refuses it: valid TP sizes 1, 3, 9 (on 2 GPUs: --tensor-parallel-size 1, "
                       "2 replicas)"),
    ({"gpu": GPUS["cpu"]}, "no memory size for cpu: pass --gpu-memory-gib"),
    ({"gpu_memory_utilization": 1.5}, "--gpu-memory-utilization 1.5 must be in (0, 1]"),
])
def test_bad_input_is_one_line(change, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        make_plan(dataclasses.replace(PlanSpec(model=SMOL, gpu=CPU), **change))


def test_every_table_model_on_every_table_gpu_gets_an_answer():
    gpus = [dataclasses.replace(g, memory_gib=g.memory_gib or 23.5) for g in GPUS.values()]
    for model in MODELS.values():
        for gpu in gpus:
            plan = make_plan(PlanSpec(model=model, gpu=gpu, max_model_len=4096))
            assert plan.weights_bytes > 0 and plan.speed.tpot_batch1_s > 0
            holds_one = plan.kv_tokens >= 4096
            # on a GPU: fits = the KV holds one request; on the CPU the weights must fit in RAM too
            assert plan.fits == holds_one if gpu.name != "cpu" else plan.fits <= holds_one, (model.name, gpu.name)
