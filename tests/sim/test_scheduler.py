"""Exact small cases of the simulated vLLM V1 scheduler (virtual clock, integer ns)."""

from dataclasses import replace

import pytest

from servelab.errors import InputError
from servelab.sim.model import EngineLimits, SimRequest, StepModel, overlapped
from servelab.sim.simulate import TOO_LONG, simulate

MS = 1_000_000
# 10 ms per step + 0.1 ms per token scheduled: easy to add up by hand.
MODEL = StepModel(overhead_s=0.010, per_seq_s=0.0, per_token_s=0.0001)
LIMITS = EngineLimits(max_num_seqs=8, max_num_batched_tokens=512, num_blocks=64, block_size=16)


def req(prompt_len=100, output_len=4, arrival_ns=0, ids=None):
    return SimRequest(arrival_ns, prompt_len, output_len, tuple(ids) if ids is not None else None)


def test_one_request_ttft_is_one_prefill_step_then_one_step_per_token():
    em = simulate([req(100, 4)], LIMITS, MODEL).emissions[0]
    prefill = 10 * MS + 100 * 100_000  # 20 ms
    decode = 10 * MS + 100_000  # 10.1 ms
    assert em.token_ns == [prefill + k * decode for k in range(4)]


def test_max_num_seqs_one_serializes_requests():
    limits = replace(LIMITS, max_num_seqs=1)
    out = simulate([req(100, 3), req(100, 3)], limits, MODEL).emissions
    assert out[1].token_ns[0] > out[0].token_ns[-1]
    # the second starts in the step after the first's last token
    assert out[1].token_ns[0] == out[0].token_ns[-1] + 20 * MS


def test_both_run_together_when_allowed():
    out = simulate([req(100, 3), req(100, 3)], LIMITS, MODEL).emissions
    assert out[0].token_ns == out[1].token_ns  # one batch: same steps


@pytest.mark.parametrize("prompt_len,budget", [(1000, 256), (1024, 256), (300, 512)])
def test_token_budget_chunks_a_long_prompt(prompt_len, budget):
    limits = replace(LIMITS, max_num_batched_tokens=budget, num_blocks=1000)
    res = simulate([req(prompt_len, 2)], limits, MODEL)
    chunks = -(-prompt_len // budget)
    assert res.steps.step_tokens[:chunks] == [budget] * (prompt_len // budget) + (
        [prompt_len % budget] if prompt_len % budget else [])
    # first token at the end of the chunks-th step
    assert res.emissions[0].token_ns[0] == res.steps.t_ns[chunks - 1] + MODEL.step_ns(1, res.steps.step_tokens[chunks - 1], 0)
    assert res.counters.steps == chunks + 1


def test_kv_exhaustion_preempts_the_newest_running_request():
    # 10 blocks of 16 = 160 tokens; two requests of 64 + 40 each need 7 blocks apiece.
    limits = replace(LIMITS, num_blocks=10)
    res = simulate([req(64, 40), req(64, 40, arrival_ns=1)], limits, MODEL)
    old, new = res.emissions
    assert res.counters.preemptions >= 1
    assert old.preemptions == 0 and new.preemptions >= 1
    assert len(old.token_ns) == len(new.token_ns) == 40
    assert new.token_ns[-1] > old.token_ns[-1]  # recomputed after the old one finished
    assert max(res.steps.kv_usage) <= 1.0


def test_identical_prompts_hit_the_prefix_cache_by_full_blocks_only():
    ids = list(range(1000, 1000 + 70))  # 4 full blocks of 16 + 6 tokens
    limits = replace(LIMITS, max_num_seqs=1)  # the second starts after the first is done
    res = simulate([req(70, 2, ids=ids), req(70, 2, arrival_ns=1, ids=ids)], limits, MODEL)
    assert res.emissions[1].cached_tokens == 64
    assert res.counters.prefix_hits == 64
    assert res.counters.prefix_queries == 140
    # its prefill computed only the 6 tokens past the cached blocks
    assert 6 in res.steps.step_tokens


def test_a_prompt_found_whole_still_computes_its_last_block():
    ids = list(range(64))  # exactly 4 blocks: at most 3 may hit ((64 − 1) // 16)
    limits = replace(LIMITS, max_num_seqs=1)
    res = simulate([req(64, 1, ids=ids), req(64, 1, arrival_ns=1, ids=ids)], limits, MODEL)
    assert res.emissions[1].cached_tokens == 48


def test_prompts_differing_inside_a_block_share_only_the_blocks_before_it():
    a = list(range(64))
    b = a[:40] + [9999] + a[41:]  # differs in block 2 (tokens 32..47)
    limits = replace(LIMITS, max_num_seqs=1)
    res = simulate([req(64, 1, ids=a), req(64, 1, arrival_ns=1, ids=b)], limits, MODEL)
    assert res.emissions[1].cached_tokens == 32


def test_no_prefix_caching_means_no_hits():
    ids = list(range(70))
    limits = replace(LIMITS, max_num_seqs=1, enable_prefix_caching=False)
    res = simulate([req(70, 2, ids=ids), req(70, 2, arrival_ns=1, ids=ids)], limits, MODEL)
    assert res.counters.prefix_hits == 0 and res.emissions[1].cached_tokens == 0


def test_concurrency_cap_sends_on_a_freed_slot():
    out = simulate([req(100, 2), req(100, 2)], LIMITS, MODEL, max_concurrency=1).emissions
    assert out[1].sent_ns == out[0].token_ns[-1]


def test_a_request_larger_than_the_kv_cache_fails_alone():
    limits = replace(LIMITS, num_blocks=4)
    out = simulate([req(100, 4), req(10, 2)], limits, MODEL).emissions
    assert out[0].error == TOO_LONG and out[0].token_ns == []
    assert out[1].error is None and len(out[1].token_ns) == 2


def test_a_slot_freed_by_a_rejected_request_is_taken_at_once():
    """Two slots, a request that can never fit between two that can: the third is sent the moment
    the second is rejected (at 0) and prefilled in the first step with the first one."""
    limits = replace(LIMITS, num_blocks=4)
    out = simulate([req(10, 2), req(100, 4), req(10, 2)], limits, MODEL, max_concurrency=2).emissions
    assert out[1].error == TOO_LONG
    assert out[2].sent_ns == 0 and out[2].token_ns[0] == out[0].token_ns[0]


def test_weight_read_floor_bounds_every_step():
    model = replace(MODEL, floor_s=0.05)
    em = simulate([req(10, 3)], LIMITS, model).emissions[0]
    assert em.token_ns == [50 * MS, 100 * MS, 150 * MS]


def test_the_weight_read_overlaps_the_token_compute():
    """overlapped(r, c) = (r^p + c^p)^(1/p): added at p = 1, near the larger as p grows, the compute
    alone without a read (the step model before read_s: nothing else moves)."""
    assert overlapped(0.004, 0.003, 1) == pytest.approx(0.007)
    assert overlapped(0.004, 0.003, 2) == pytest.approx(0.005)
    assert overlapped(0.004, 0.003, 50) == pytest.approx(0.004, rel=1e-3)
    assert overlapped(0.0, 0.003, 2.5) == 0.003 and overlapped(0.004, 0.0, 2.5) == 0.004
    base = StepModel(overhead_s=0.002, per_seq_s=0.0001, per_token_s=0.00002)
    read = replace(base, read_s=0.004)
    # 200 tokens of 20 us = 4 ms of compute against a 4 ms read: 2^(1/2.5) x 4 ms, not 8 ms
    assert read.step_ns(2, 200, 0) == round((0.002 + 0.0002 + 0.004 * 2 ** 0.4) * 1e9)
    assert base.step_ns(2, 200, 0) == round((0.002 + 0.0002 + 0.004) * 1e9)
    em = simulate([req(10, 3)], LIMITS, replace(MODEL, read_s=0.05)).emissions[0]
    gaps = [b - a for a, b in zip(em.token_ns, em.token_ns[1:])]
    assert all(g >= 50 * MS for g in gaps)


@pytest.mark.parametrize("bad", [dict(overlap=0.5), dict(read_s=-1.0)])
def test_a_bad_overlap_or_read_is_an_input_error(bad):
    with pytest.raises(InputError):
        StepModel(**bad)


@pytest.mark.parametrize("bad", [dict(max_num_seqs=0), dict(block_size=-1), dict(num_blocks=1.5)])
def test_bad_limits_are_input_errors(bad):
    with pytest.raises(InputError):
        replace(LIMITS, **bad)


def test_bad_step_model_is_an_input_error():
    with pytest.raises(InputError):
        StepModel(overhead_s=-1.0)


def test_reset_forgets_unused_cached_blocks_only():
    from servelab.sim.kv import BlockPool

    pool = BlockPool(8)
    pool.take(2, [])
    assert pool.cache(11) and pool.cache(12)
    pool.release([11], 0)  # block 11 unused now, 12 still held
    assert pool.reset() == 1
    assert pool.longest_hit([11], 1) == [] and pool.longest_hit([12], 1) == [12]
    assert pool.free == 7
