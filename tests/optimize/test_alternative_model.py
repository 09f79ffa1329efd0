"""``optimize --alternative-model``: another checkpoint served instead of the base, under the
same load, kept only when better beyond noise.

Known truth in the simulator's fast mode. The simulator runs no weights: what a checkpoint
changes there is its step costs, so an alternative "model" is a ``--step-model`` file (the
stand-in ``optimize/config.py`` names). The baseline below is KV-limited: ``--kv-cache-tokens
2048`` holds 6 requests of 256 + 64 tokens (20 blocks of 16 each, 128 blocks) while the
client sends 16 and the engine would run 64, so the cache binds. ``fast.json`` costs 8 ms a
step where the base costs 20 ms (``--step-overhead-ms 20``): the same 6 requests finish in
fewer seconds, so its throughput is higher by far more than the 10 % floor. ``same.json``
states the base's own costs: nothing changes, so it is within noise and reverted.

A checkpoint can change the answers (``alters_outputs``), and the simulator runs no weights: on
its runs alone such a change is never kept (``not_kept_on_simulation``). The loop's mechanics are
tested with ``Judged``: the simulator's speed, and answers kept as a real greedy run keeps them,
the same for every checkpoint (its quality verdict: same).
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from servelab.diagnose import changes
from servelab.engines import EngineSpec
from servelab.errors import InputError
from servelab.optimize.config import Config
from servelab.optimize.loop import optimize
from servelab.optimize.measure import Repeats, SimMeasurer, client_workload, engine_runs
from servelab.optimize.plan import OptimizePlan, check, scale_line, serve_line
from servelab.optimize.prerank import Prerank
from servelab.study.entries import EngineEntry

KV_LIMITED = ("--max-num-seqs", "64", "--kv-cache-tokens", "2048", "--step-overhead-ms", "20",
              "--step-per-token-ms", "0.01")
BASE_COSTS = {"overhead_s": 0.02, "per_token_s": 0.00001}  # the flags above; the rest at their defaults
FAST_COSTS = {"overhead_s": 0.008, "per_token_s": 0.00001}


def kv_plan(plan_of, tmp, name: str, models: tuple[str, ...]) -> OptimizePlan:
    plan = plan_of(tmp, name, budget_runs=12, knobs=("model",), alternative_models=models)
    entry = EngineEntry("sim", EngineSpec(name="sim", kind="sim", model="sim", args=KV_LIMITED), args=KV_LIMITED)
    load = dataclasses.replace(plan.spec.load, max_concurrency=16)
    return dataclasses.replace(plan, engine=entry, spec=dataclasses.replace(plan.spec, load=load))


class Judged(SimMeasurer):
    """The simulator's speed with a real run's kept answers, the same whatever the checkpoint."""

    simulated = False

    def measure(self, config, repeats: int) -> Repeats:
        m = super().measure(config, repeats)
        prompts = [f"p{i}" for i in range(20)]
        kept = {"keys": prompts, "prompts": prompts, "key_of": "token_ids",
                "sampling": {"temperature": 0.0, "seed": None, "greedy": True}}
        results = tuple({**r, "generated_texts": [f"answer {p}" for p in prompts], "errors": [""] * len(prompts),
                         "servelab": {**r["servelab"], "responses": kept}} for r in m.results)
        return dataclasses.replace(m, results=results)


def checkpoints(tmp) -> tuple[str, str]:
    same, fast = tmp / "same.json", tmp / "fast.json"
    same.write_text(json.dumps(BASE_COSTS))
    fast.write_text(json.dumps(FAST_COSTS))
    return str(same), str(fast)


@pytest.fixture(scope="module")
def record(tmp_path_factory, plan_of) -> tuple[dict, str, str]:
    tmp = tmp_path_factory.mktemp("alt")
    same, fast = checkpoints(tmp)
    plan = kv_plan(plan_of, tmp, "alt", (same, fast))
    measurer = Judged(plan.name, plan.results, plan.engine, plan.spec, plan.slo)
    return optimize(plan, measurer, say=lambda _: None), same, fast


def test_on_simulation_alone_a_faster_checkpoint_is_not_kept_quality_not_judged(plan_of, tmp_path):
    """``--simulate --simulate-first``: every run simulated, so nothing judges the checkpoint's answers."""
    same, fast = checkpoints(tmp_path)
    plan = dataclasses.replace(kv_plan(plan_of, tmp_path, "simonly", (same, fast)), simulate_first=True)
    measurer = SimMeasurer(plan.name, plan.results, plan.engine, plan.spec, plan.slo)
    presim = Prerank(SimMeasurer(plan.name + "/presim", plan.results, plan.engine, plan.spec, plan.slo))
    doc = optimize(plan, measurer, say=lambda _: None, prerank=presim)
    step = next(s for s in doc["steps"] if (s["change"] or {}).get("to") == fast)
    assert step["noise_verdict"] == "better" and step["gain"] > 1.10 and not step["simulated"]
    assert step["quality"] == {"alters_outputs": True, "verdict": "quality not judged: simulated (no weights run)",
                               "blocks": True}
    assert step["kept"] is False and step["decision"] == "not kept (quality not judged)"
    assert step["why"].endswith("better beyond noise; not kept: quality not judged: simulated (no weights run)")
    assert not any(s["kept"] for s in doc["steps"]) and doc["final"].get("model") != fast


def test_the_baseline_is_kv_limited_and_the_table_offers_a_model_there(record):
    doc, _, _ = record
    assert doc["baseline"]["verdict"] == "kv-capacity"
    assert changes.ALT_MODEL in changes.remedy("sim", "kv-capacity").changes


def test_a_no_effect_checkpoint_is_reverted_within_noise(record):
    doc, same, _ = record
    step = doc["steps"][0]
    assert step["change"] == {"kind": "model", "name": "model", "from": "sim", "to": same}
    assert step["noise_verdict"] == "within noise" and not step["kept"] and step["gain"] == 1.0
    assert "tokenizer kept" in step["why"] and step["why"].endswith("reverted")


def test_a_checkpoint_that_helps_is_kept_and_the_answer_serves_it(record):
    doc, _, fast = record
    step = doc["steps"][1]
    assert step["change"] == {"kind": "model", "name": "model", "from": "sim", "to": fast}
    assert step["verdict"] == "kv-capacity" and step["kept"] and step["gain"] > 1.10
    assert step["config"]["model"] == fast
    final = doc["final"]
    assert final["model"] == fast and final["from_step"] == 2
    assert f"--step-model {fast}" in final["serve_command"]
    # once kept, the other checkpoint is judged against it (slower: not kept), then nothing is left
    assert [s["kept"] for s in doc["steps"][2:]] == [False] * len(doc["steps"][2:])
    assert doc["stopped_because"] == "no untried change for the verdict"


def test_the_table_offers_it_where_a_smaller_checkpoint_frees_memory_and_never_for_external():
    for kind, key in (("vllm", "kv-capacity"), ("vllm", "memory-bandwidth-bound"), ("vllm-cpu", "kv-capacity")):
        assert changes.ALT_MODEL in changes.remedy(kind, key).changes, (kind, key)
    for kind, table in changes.TABLE.items():
        offered = {key for key, r in table.items() if changes.ALT_MODEL in r.changes}
        # prefix-cache-eviction takes the KV remedy: a smaller checkpoint leaves room for the blocks sessions reuse
        assert offered <= {"kv-capacity", "memory-bandwidth-bound", "prefix-cache-eviction"}, kind
    assert not any(c.kind == changes.MODEL for r in changes.TABLE["external"].values() for c in r.changes)


def test_a_real_engine_serves_the_checkpoint_with_the_workloads_tokenizer(plan_of, tmp_path):
    plan = plan_of(tmp_path, "v")
    spec = EngineSpec(name="vllm", kind="vllm", model="Qwen/Qwen3-8B", args=("--max-num-seqs", "8"))
    plan = dataclasses.replace(plan, engine=EngineEntry("vllm", spec, args=spec.args), kind="vllm",
                               fast=False, spec=dataclasses.replace(plan.spec, tokenizer=None))
    config = Config(spec.args, {}, 8, None, "Qwen/Qwen3-8B-AWQ")
    runs = engine_runs("v", tmp_path, plan.engine, config, 0, 8000)
    assert runs.engine.spec.model == "Qwen/Qwen3-8B-AWQ" and runs.engine.spec.args == spec.args
    assert client_workload(plan.spec, config, None, "Qwen/Qwen3-8B").spec.tokenizer == "Qwen/Qwen3-8B"
    assert client_workload(plan.spec, Config(spec.args), None, "Qwen/Qwen3-8B").spec.tokenizer is None
    line = serve_line(plan, config)  # the CPU build here adds its own flags and environment
    assert "vllm serve Qwen/Qwen3-8B-AWQ " in line and line.endswith("--max-num-seqs 8")
    assert "--engine vllm" in scale_line(plan, config) and "--model Qwen/Qwen3-8B-AWQ" in scale_line(plan, config)


@pytest.mark.parametrize("kind,models,message", [
    ("external", ("x",), "--alternative-model needs an engine servelab starts"),
    ("sim", ("sim",), "--alternative-model sim is the model already served"),
    ("llamacpp", ("x.gguf",), "--alternative-model is offered for vLLM, its CPU build and the sim engine"),
])
def test_refusals(plan_of, tmp_path, kind, models, message):
    plan = dataclasses.replace(plan_of(tmp_path, "r"), kind=kind, alternative_models=models)
    with pytest.raises(InputError, match=message):
        check(plan)
