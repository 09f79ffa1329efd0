"""vLLM's non-KV memory model: the prior reproduces the old estimate, V0's profile batch, the fitted file."""

import json

import pytest

from servelab.planner import find_model
from servelab.planner import nonkv
from servelab.planner.budget import GIB, estimate_other
from servelab.planner.nonkv import NonKvConstants, activation_bytes, v0_profile_batch

QWEN3_8B = find_model("Qwen3-8B")


def test_the_prior_is_the_estimate_the_planner_used_before():
    """(4 x hidden + 2 x FFN / TP) x 2 bytes per token and three fp32 logit copies per request."""
    got = activation_bytes(QWEN3_8B, 2048, 256, 1, NonKvConstants())
    assert got == 2048 * (4 * 4096 + 2 * 12288) * 2 + 256 * 151936 * 4 * 3


def test_the_sampler_sees_no_more_requests_than_tokens():
    c = NonKvConstants(ffn_factor=0, hidden_factor=0, sampler_copies=1)
    assert activation_bytes(QWEN3_8B, 16, 256, 1, c) == 16 * 151936 * 4


@pytest.mark.parametrize("max_model_len, tokens", [(4096, 4096), (1024, 2048), (20000, 20000), (131072, 2048)])
def test_v0_profiled_the_context_or_a_chunk(max_model_len, tokens):
    assert v0_profile_batch(max_model_len) == (tokens, 256)


def test_the_planner_reads_the_fitted_constants(tmp_path, monkeypatch):
    path = tmp_path / "fitted.json"
    path.write_text(json.dumps({"nonkv": {"ffn_factor": 1.0, "hidden_factor": 0.0, "sampler_copies": 0.0,
                                          "non_torch_gib": 0.5, "non_torch_tp_gib": 1.0, "cuda_graph_gib": 0.25,
                                          "source": "a test fit"}}), encoding="utf-8")
    monkeypatch.setattr(nonkv, "FITTED", path)
    nonkv.fitted_constants.cache_clear()
    try:
        other = estimate_other(QWEN3_8B, 1000, 8, 1)
    finally:
        nonkv.fitted_constants.cache_clear()
    assert other.activations == 1000 * 12288 and other.non_torch == GIB // 2 and other.cuda_graphs == GIB // 4
