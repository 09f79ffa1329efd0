"""The speed model real engines reach: roofline where uncalibrated, and the simulator runs the same model."""

import dataclasses

import pytest

from servelab.planner import find_gpu, find_model
from servelab.planner.corpus.rows import load_corpus
from servelab.planner.corpus.fit import fit_speed, outside_scope
from servelab.planner.speed_model import (MOE_KERNEL_SERIES, Efficiency, Engine, SpeedConstants, concurrency1,
                                          expert_bytes, moe_kernel, sim_step_model, step_costs, tpot_s)
from servelab.sim.model import EngineLimits, SimRequest, StepModel, distinct_experts, experts_s, overlapped
from servelab.sim.simulate import simulate

QWEN3_14B = find_model("Qwen3-14B")
CONSTANTS = SpeedConstants(overhead_s=0.002, request_s=0.003,
                           families={"ampere-hbm": Efficiency(bw_eff=0.6, compute_eff=0.8)}, source="test fit")


def engine(gpu: str) -> Engine:
    return Engine(QWEN3_14B, find_gpu(gpu), weight_bytes=29.5e9, kv_bytes_per_token=163840.0,
                  max_num_batched_tokens=2048)


def test_a_family_no_run_calibrates_is_the_roofline():
    costs = step_costs(engine("A40"), CONSTANTS)
    assert not costs.calibrated and costs.request_s == 0
    assert costs.overhead_s == 0
    assert costs.read_s == pytest.approx(29.5e9 / 696e9)  # weights / peak bandwidth, nothing else
    assert "lower bound" in sim_step_model(costs, "x")["source"]


def test_the_roofline_overlaps_the_weight_read_with_the_compute_and_the_fit_adds_them():
    """The H200's GEMMs: (read^2.5 + compute^2.5)^(1/2.5), a lower bound nearer the truth than the
    sum; the fitted model keeps adding them (FITTED_OVERLAP), as its constants were fitted."""
    from servelab.sim.model import OVERLAP

    roofline, fitted = step_costs(engine("A40"), CONSTANTS), step_costs(engine("A100"), CONSTANTS)
    assert roofline.overlap == OVERLAP == 2.5 and fitted.overlap == 1.0
    tokens = roofline.read_s / roofline.per_token_s  # as long to compute as to read
    assert roofline.step_s(tokens, 0) == pytest.approx(roofline.read_s * 2 ** (1 / 2.5))
    f_tokens = fitted.read_s / fitted.per_token_s
    assert fitted.step_s(f_tokens, 0) == pytest.approx(0.002 + 2 * fitted.read_s)


def test_a_calibrated_family_reads_slower_than_its_datasheet():
    costs = step_costs(engine("A100"), CONSTANTS)
    assert costs.calibrated
    assert costs.overhead_s == pytest.approx(0.002)
    assert costs.read_s == pytest.approx(29.5e9 / (2039e9 * 0.6))
    assert costs.per_kv_token_s == pytest.approx(163840 / (2039e9 * 0.6))


@pytest.mark.parametrize("gpu", ["A100", "A40"])  # fitted (read and compute added), roofline (overlapped)
def test_the_simulator_runs_the_same_step_model(gpu):
    """One request alone through the simulated engine: its TTFT (4 prefill chunks) and TPOT are
    the speed model's, to the nanosecond rounding of each step."""
    e = engine(gpu)
    costs = step_costs(e, CONSTANTS)
    expected = concurrency1(costs, e, 8000, 64)
    model = StepModel(**sim_step_model(costs, "test"))
    limits = EngineLimits(max_num_seqs=8, max_num_batched_tokens=2048, num_blocks=4096, block_size=16)
    got = simulate([SimRequest(0, 8000, 64)], limits, model).emissions[0].token_ns
    ttft_ms = got[0] / 1e6  # the API server's per-request cost held it back before the engine saw it
    tpot_ms = (got[-1] - got[0]) / (len(got) - 1) / 1e6
    assert ttft_ms == pytest.approx(expected["mean_ttft_ms"], rel=1e-4)
    assert tpot_ms == pytest.approx(expected["mean_tpot_ms"], rel=2e-3)


def test_a_row_beyond_the_calibrated_tensor_parallel_is_shown_but_never_fitted():
    corpus = load_corpus()
    tp8 = [r for r in corpus.speed if r.tensor_parallel == 8]
    assert tp8 and all("TP 8: per-layer all-reduce" in outside_scope(r) for r in tp8)
    assert all(outside_scope(r) == "" for r in corpus.speed if r.tensor_parallel <= 2)
    fitted = [r for r in corpus.speed if not corpus.held_out(r) and not outside_scope(r)
              and r.workload.max_concurrency == 1]
    assert f"fitted on {len(fitted)} benchmark rows" in fit_speed(corpus).source


def _row(concurrency: int, prompts: int, rate: float | None = None):
    from servelab.planner.corpus.rows import Source, SpeedRow, Workload

    return SpeedRow("t", Source("https://example.org", "2026-01-01", "0.11"), "Qwen/Qwen3-14B", "A100",
                    Workload("random", 512, 64, prompts, concurrency, rate), {"mean_tpot_ms": 1.0})


def test_a_concurrent_benchmark_is_replayed_through_the_simulated_engine():
    """Concurrency 1 through the simulator is the closed form; at concurrency 8 each decode step
    carries 8 requests, so TPOT grows by the added tokens' cost and throughput by nearly 8x."""
    from servelab.planner.corpus.replay import simulated, speed_engine

    one = _row(1, 6)
    e = speed_engine(one)
    costs = step_costs(e, CONSTANTS)
    closed, sim = concurrency1(costs, e, 512, 64), simulated(one, e, costs)
    assert sim["mean_ttft_ms"] == pytest.approx(closed["mean_ttft_ms"], rel=1e-6)
    assert sim["mean_tpot_ms"] == pytest.approx(closed["mean_tpot_ms"], rel=1e-3)
    assert sim["output_tok_s"] == pytest.approx(closed["output_tok_s"], rel=1e-3)
    eight = simulated(_row(8, 64), e, costs)
    decode8 = costs.step_s(8, 8 * (512 + 32), 8 * (512 + 32))
    # over one request's 63 decode steps about 8 others join, each prefilling its 512 tokens in a step
    prefill = costs.per_token_s * 512 + costs.attention_flop_s * 512 * 256 + costs.per_kv_token_s * 512
    assert decode8 * 1e3 < eight["mean_tpot_ms"] < (decode8 + 8 * prefill / 63) * 1e3 * 1.1
    assert 5 * closed["output_tok_s"] < eight["output_tok_s"] < 8 * closed["output_tok_s"]
    slow = simulated(_row(None, 20, rate=0.5), e, costs)  # 2 s apart: every request alone
    assert slow["mean_ttft_ms"] == pytest.approx(closed["mean_ttft_ms"], rel=1e-6)


def test_weight_only_kernels_compute_slower_and_fp8_cores_compute_faster():
    """AWQ/GPTQ, and FP8 on a GPU without FP8 tensor cores (A100: Marlin W8A16), dequantize inside the
    matmul: their compute time is bf16's times the factor. On H100, FP8 runs on FP8 cores at twice the
    peak and is not weight-only."""
    c = SpeedConstants(overhead_s=0.002, request_s=0.003, source="test fit", weight_only_compute=2.0,
                       families={"ampere-hbm": Efficiency(), "hopper": Efficiency()})
    bf16_a100 = step_costs(engine("A100"), c).per_token_s
    assert step_costs(dataclasses.replace(engine("A100"), quantized=True), c).per_token_s == pytest.approx(2 * bf16_a100)
    assert step_costs(dataclasses.replace(engine("A100"), fp8=True), c).per_token_s == pytest.approx(2 * bf16_a100)
    bf16_h100 = step_costs(engine("H100"), c).per_token_s
    assert step_costs(dataclasses.replace(engine("H100"), fp8=True), c).per_token_s == pytest.approx(bf16_h100 * 989 / 1979)
    # the roofline of an uncalibrated family stays the datasheet's: no fitted factor applies there
    assert step_costs(dataclasses.replace(engine("A40"), quantized=True), c).per_token_s == \
        step_costs(engine("A40"), c).per_token_s


def test_each_running_request_adds_the_per_sequence_cost_to_every_step():
    costs = step_costs(engine("A100"), dataclasses.replace(CONSTANTS, per_seq_s=1e-4))
    plain = dataclasses.replace(costs, per_seq_s=0.0)
    assert tpot_s(costs, 512, 64, batch=8) - tpot_s(plain, 512, 64, batch=8) == pytest.approx(8e-4)
    assert StepModel(**sim_step_model(costs, "x")).per_seq_s == 1e-4  # the simulator runs the same cost
    e = engine("A100")
    assert concurrency1(costs, e, 512, 64)["mean_tpot_ms"] == pytest.approx(
        concurrency1(plain, e, 512, 64)["mean_tpot_ms"] + 0.1)


def test_the_costs_under_load_are_found_where_they_are_known():
    """Rows under load whose figures are the model's own at a known per-sequence cost and weight-only
    factor: fit_load finds that pair on its grid (the concurrency-1 constants refitted with it)."""
    from servelab.planner.corpus.rows import Corpus
    from servelab.planner.corpus.replay import replay_speed
    from servelab.planner.corpus.fit import fit_load

    corpus = load_corpus()
    load_ids = ("gpustack-q3-14b-h100-128-4-cinf", "gpustackq-q3-8b-bf16-a100-sharegpt-cinf",
                "gpustackq-q3-8b-awq-a100-sharegpt-cinf")
    c1 = [r for r in corpus.speed if r.workload.max_concurrency == 1]
    truth = fit_speed(corpus, per_seq_s=1e-4, weight_only_compute=2.0)
    made = []
    for row in (r for r in corpus.speed if r.id in load_ids):
        figures = {c.metric: c.predicted for c in replay_speed(row, truth) if c.metric != "output_tok_s"}
        made.append(dataclasses.replace(row, measured=figures))
    small = Corpus(corpus.memory, tuple(c1 + made), corpus.held_out_ids)
    found = fit_load(small, per_seq_grid=(0.0, 1e-4, 3e-4), weight_only_grid=(1.0, 2.0))
    assert (found.per_seq_s, found.weight_only_compute) == (1e-4, 2.0)
    assert found.overhead_s == truth.overhead_s and "3 fit rows under load" in found.source


def test_a_replay_runs_against_the_planners_kv_cache_and_never_below_one_request():
    from servelab.planner import PlanSpec, make_plan
    from servelab.planner.corpus.replay import OLD_DEFAULT_UTILIZATION, replay_kv_tokens, speed_engine

    row = next(r for r in load_corpus().speed if r.id == "gpustack-q3-32b-a100-32000-100-cinf")
    e = speed_engine(row)
    planned = make_plan(PlanSpec(model=e.model, gpu=e.gpu, quantization="none",
                                 gpu_memory_utilization=OLD_DEFAULT_UTILIZATION)).kv_tokens
    assert replay_kv_tokens(row, e) == planned == 40_272  # room for one 32,077-token request at a time
    huge = dataclasses.replace(row, workload=dataclasses.replace(row.workload, input_len=60_000))
    assert replay_kv_tokens(huge, e) == 60_080  # the engine served it, so it had room for one: 3,755 blocks


def moe_engine(model: str, gpu: str) -> Engine:
    shape = find_model(model)
    return Engine(shape, find_gpu(gpu), weight_bytes=2 * shape.active, kv_bytes_per_token=98304.0,
                  expert_bytes=expert_bytes(shape, 16, 1))


def test_an_moe_step_reads_the_experts_its_tokens_pick_and_pays_the_kernels_fixed_cost_per_moe_layer():
    fixed, share = moe_kernel()
    per_expert = 3 * 2048 * 768 * 2  # Qwen3-30B-A3B, bf16, one GPU
    moe = step_costs(moe_engine("Qwen3-30B-A3B", "A100"), CONSTANTS)
    assert moe.overhead_s == pytest.approx(CONSTANTS.overhead_s + 48 * fixed)
    assert moe.expert_read_s == pytest.approx(48 * per_expert / (2039e9 * share))
    # the routed experts left the family-efficiency read: they are read at the kernels' own share
    assert moe.read_s == pytest.approx((2 * find_model("Qwen3-30B-A3B").active - 8 * 48 * per_expert) / (2039e9 * 0.6))
    # the routed experts' FLOPs left the per-token compute for the fused-MoE kernels, where they overlap the read
    whole = 2 * find_model("Qwen3-30B-A3B").active / (312e12 * 0.8)
    assert moe.per_token_s + moe.expert_token_s == pytest.approx(whole)
    assert moe.expert_token_s == pytest.approx(whole * 8 * 48 * 3 * 2048 * 768 / find_model("Qwen3-30B-A3B").active)
    one, many = moe.step_s(1, 0), moe.step_s(128, 0)
    assert many - one == pytest.approx(experts_s(moe, 128) - experts_s(moe, 1) + moe.per_token_s * 127)
    assert experts_s(moe, 128) == pytest.approx(overlapped(moe.expert_read_s * distinct_experts(128, 8, 128),
                                                           moe.expert_token_s * 128, 2.5))
    assert experts_s(moe, 1) >= moe.expert_read_s * 8  # one token: its 8 experts, the compute hidden under them
    assert distinct_experts(128, 8, 1) == pytest.approx(8) and distinct_experts(128, 8, 128) > 127.9
    dense = step_costs(engine("A100"), CONSTANTS)
    assert dense.overhead_s == CONSTANTS.overhead_s and dense.expert_read_s == 0 and dense.experts == 0
    # DeepSeek's first three layers keep a dense feed-forward: 58 MoE layers of 61
    assert find_model("DeepSeek-R1").moe_layers == 58 and find_model("Qwen3-14B").moe_layers == 0
    deepseek = step_costs(moe_engine("DeepSeek-R1", "A100"), CONSTANTS)
    assert deepseek.overhead_s == pytest.approx(CONSTANTS.overhead_s + 58 * fixed)
    # the roofline: one token's routed experts in the weight read at any batch (a lower bound), no fixed cost
    roofline = step_costs(moe_engine("Qwen3-30B-A3B", "A40"), CONSTANTS)
    assert roofline.overhead_s == 0 and roofline.expert_read_s == 0 and roofline.experts == 0
    assert roofline.read_s == pytest.approx(2 * find_model("Qwen3-30B-A3B").active / 696e9)


def test_a_plan_of_an_moe_wires_its_expert_bytes_through_quantization_tensor_parallel_and_a_checkpoints_size():
    from servelab.planner import GPUS, PlanSpec, make_plan

    def costs(**spec):
        return make_plan(PlanSpec(model=find_model("Qwen3-30B-A3B"), gpu=GPUS["H100"], max_model_len=8192,
                                  **spec)).costs

    bf16, awq, tp2 = costs(), costs(quantization="awq"), costs(tensor_parallel=2, gpu_count=2)
    share = moe_kernel()[1]
    assert bf16.experts == 128 and bf16.expert_read_s == pytest.approx(48 * 3 * 2048 * 768 * 2 / (3350e9 * share))
    assert tp2.expert_read_s == pytest.approx(bf16.expert_read_s / 2)
    assert awq.expert_read_s == pytest.approx(bf16.expert_read_s * (133 / 32) / 16)  # AWQ's bits per weight
    small = costs(weights_bytes=17 * 10**9)  # a checkpoint smaller than 16 bits a weight: the experts follow it
    assert 0 < small.read_s < bf16.read_s and small.expert_read_s < bf16.expert_read_s
    assert all(c.read_s > 0 for c in (bf16, awq, tp2, small))


def test_the_simulated_engine_runs_the_same_moe_step_as_the_planner():
    costs = step_costs(moe_engine("Qwen3-30B-A3B", "A100"), CONSTANTS)
    model = StepModel(**{k: v for k, v in sim_step_model(costs, "x").items()})
    for tokens in (1, 8, 64, 2048):
        assert model.step_ns(1, tokens, 0) == pytest.approx(costs.step_s(tokens, 0) * 1e9, abs=1)
    assert StepModel(**model.to_dict()) == model and model.to_dict()["experts"] == 128  # a step-model file
    dense = step_costs(engine("A100"), CONSTANTS)
    assert "experts" not in dense.to_dict() and "experts" not in sim_step_model(dense, "x")  # as before MoE terms


def test_the_moe_kernel_constants_are_the_medians_of_vllms_published_kernel_series():
    """kernel time = fixed + the distinct experts' bytes / (datasheet x share): the form fits the
    first three series within 6 % at every batch; the planner takes the median fixed time and share
    of all five, which keeps every series within 10 % from 8 tokens up."""
    fits = [series.fit() for series in MOE_KERNEL_SERIES]
    fixed, share = moe_kernel()
    assert fixed == pytest.approx(sorted(f for f, _ in fits)[2])
    assert share == pytest.approx(sorted(e for _, e in fits)[2])
    assert 40e-6 < fixed < 70e-6 and 0.8 < share < 1.0
    for index, (series, (f, e)) in enumerate(zip(MOE_KERNEL_SERIES, fits)):
        bandwidth = find_gpu(series.gpu).bandwidth_gbs * 1e9
        for batch, measured in zip(series.batches, series.seconds):
            if index < 3:
                assert f + series.read_bytes(batch) / (bandwidth * e) == pytest.approx(measured, rel=0.06)
            if batch >= 8:
                assert fixed + series.read_bytes(batch) / (bandwidth * share) == pytest.approx(measured, rel=0.10)
    assert MOE_KERNEL_SERIES[0].read_bytes(1) == 8 * 3 * 2048 * 768 * 2  # one token: its 8 routed experts


def test_the_fit_leaves_moe_rows_to_the_kernel_benchmarks_term():
    """An MoE fit row would have the fitted overhead absorb the fused-MoE cost that step_costs adds
    again: the fit leaves MoE rows out, so adding one changes no fitted constant."""
    corpus = load_corpus()
    moe = next(r for r in corpus.speed if r.model == "Qwen/Qwen3-30B-A3B")
    fitted_row = next(r for r in corpus.speed if not corpus.held_out(r) and not r.workload.under_load
                      and "mean_tpot_ms" in r.measured)
    as_fit = dataclasses.replace(moe, id="moe-as-a-fit-row", model=moe.model, gpu=fitted_row.gpu,
                                 source=fitted_row.source)
    grown = dataclasses.replace(corpus, speed=[*corpus.speed, as_fit])
    assert not grown.held_out(as_fit)
    assert fit_speed(grown).overhead_s == fit_speed(corpus).overhead_s


def test_a_config_json_names_the_dense_layers_of_an_moe():
    from servelab.planner.files import shape_from_config

    config = {"num_hidden_layers": 61, "hidden_size": 7168, "num_attention_heads": 128, "intermediate_size": 18432,
              "vocab_size": 129280, "n_routed_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 2048,
              "first_k_dense_replace": 3}
    assert shape_from_config(config, "x").moe_layers == 58
    assert shape_from_config({**config, "first_k_dense_replace": None}, "x").moe_layers == 61
