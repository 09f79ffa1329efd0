"""``servelab optimize`` against known truth: the simulated engine's fast mode, configured
with four limits, each written below with why it binds and in which order.

The truth (random 256 → 64 tokens, 48 prompts, all offered at once):
  - scheduler cap: ``--max-num-seqs 2`` while the client sends 8 at once → 6 wait at the engine;
  - KV limit: ``--kv-cache-tokens 2048`` holds 6 requests of 320 tokens (block 16: 20 blocks each,
    128 blocks) → once max_num_seqs reaches 8, the cache fills before the count;
  - client cap: ``--max-concurrency 8`` → with room in the engine, the client's cap binds next;
  - token budget: ``--max-num-batched-tokens 64`` with a 20 ms step overhead and a tiny per-token
    cost (``--step-overhead-ms 20 --step-per-token-ms 0.01``): a 256-token prompt takes 4 steps
    to prefill, so once the count, the cache and the client give way, each step admits too little.
So the verdicts come in this order: scheduler-cap (max_num_seqs) → kv-capacity →
client-concurrency-cap → scheduler-cap (max_num_batched_tokens).
"""

from __future__ import annotations

import json

import pytest

from servelab.optimize import loop
from servelab.optimize.loop import optimize
from servelab.optimize.measure import SimMeasurer
from servelab.optimize.plan import OptimizePlan
from servelab.optimize.prerank import Prerank


class Counting(SimMeasurer):
    """The fast-mode measurer, counting what it was asked to measure (resume must not ask again)."""

    def __init__(self, plan: OptimizePlan) -> None:
        super().__init__(plan.name, plan.results, plan.engine, plan.spec, plan.slo)
        self.asked: list = []

    def measure(self, config, repeats):
        self.asked.append(config)
        return super().measure(config, repeats)


def run(plan: OptimizePlan) -> dict:
    sim = SimMeasurer(plan.name + "/presim", plan.results, plan.engine, plan.spec, None) if plan.simulate_first \
        else None
    return optimize(plan, Counting(plan), say=lambda _: None, prerank=Prerank(sim) if sim else None)


@pytest.fixture(scope="module")
def truth(tmp_path_factory, plan_of) -> dict:
    return run(plan_of(tmp_path_factory.mktemp("opt"), "truth", budget_runs=40))


def first_seen(record: dict) -> list[str]:
    order = []
    for step in record["steps"]:
        limit = step["evidence_values"].get("limit")
        name = step["verdict"] + (f":{limit}" if step["verdict"] == "scheduler-cap" else "")
        if name not in order:
            order.append(name)
    return order


def test_it_finds_the_limits_in_order(truth):
    assert truth["baseline"]["verdict"] == "scheduler-cap"
    assert first_seen(truth) == ["scheduler-cap:max_num_seqs", "kv-capacity", "client-concurrency-cap",
                                 "scheduler-cap:max_num_batched_tokens"]
    assert truth["stopped_because"] == "no untried change for the verdict"


def test_it_keeps_the_changes_that_help_and_the_answer_lifts_every_limit(truth):
    kept = [s for s in truth["steps"] if s["kept"]]
    assert kept and all(s["noise_verdict"] == "better" and s["gain"] > 1.10 for s in kept)
    final = truth["final"]
    args = final["engine_args"]

    def value(flag):
        return int(args[len(args) - 1 - args[::-1].index(flag) + 1])

    assert value("--max-num-seqs") > 2 and value("--kv-cache-tokens") > 2048
    assert value("--max-num-batched-tokens") > 64 and final["client"]["max_concurrency"] > 8
    assert final["output_tok_s"] > 5 * truth["baseline"]["result"]["output_tok_s"]
    assert final["serve_command"].endswith("# SIMULATED: try these knobs on the real engine")


def test_a_change_with_no_effect_is_within_noise_and_reverted(tmp_path, plan_of):
    """The step overhead dominates and nothing queues for the budget: doubling it does nothing."""
    plan = plan_of(tmp_path, "noop")
    state = loop._state(plan, Counting(plan), lambda _: None)
    best = loop._baseline(state)
    from servelab.diagnose.changes import BATCHED
    from servelab.optimize.config import Move

    loop._try(state, best, Move(BATCHED, "64", "65536"))  # a budget no step can fill here: 2 running
    step = state.record["steps"][-1]
    assert step["noise_verdict"] == "within noise" and step["kept"] is False
    assert "reverted" in step["why"] and 0.9 < step["gain"] < 1.1
    assert loop._best(state).config == best.config  # the best is still the baseline


def test_its_answer_is_within_10_percent_of_an_exhaustive_simulated_tune(truth, tmp_path, workload_spec):
    from servelab.search.knobs import parse_knob
    from servelab.sweep import presim
    from servelab.sweep.tune import TunePlan

    step_model = ["--sim-step-overhead-ms", "20", "--sim-step-per-token-ms", "0.01"]
    spec = workload_spec(step_model)
    grid = ["max-num-seqs=8,32", "max-num-batched-tokens=64,256", "kv-cache-tokens=4096,16384"]
    plan = TunePlan("grid", None, spec, knobs=tuple(parse_knob(k) for k in grid), loads=(16.0, 32.0),
                    results=tmp_path)
    best = presim.rank(plan)[0].best.throughput
    assert truth["final"]["output_tok_s"] >= 0.9 * best, (truth["final"], best)


def test_a_rerun_replays_the_recorded_decisions_and_goes_on(tmp_path, plan_of):
    first = run(plan_of(tmp_path, "resume", budget_runs=6))
    assert first["stopped_because"] == "budget: runs" and len(first["steps"]) == 2
    plan = plan_of(tmp_path, "resume", budget_runs=10)
    measurer = Counting(plan)
    second = optimize(plan, measurer, say=lambda _: None)
    assert second["steps"][:2] == first["steps"] and second["baseline"] == first["baseline"]
    assert len(measurer.asked) == len(second["steps"]) - 2  # recorded steps were not measured again
    assert second["budget"]["runs_used"] == 10


def test_simulate_first_spends_fewer_real_runs_for_the_same_answer(truth, tmp_path, plan_of):
    ranked = run(plan_of(tmp_path, "simfirst", budget_runs=40, simulate_first=True))
    assert ranked["final"]["output_tok_s"] == pytest.approx(truth["final"]["output_tok_s"], rel=0.02)
    assert ranked["budget"]["runs_used"] < truth["budget"]["runs_used"]
    assert ranked["budget"]["simulated_runs"] > 0
    assert all(not s["kept"] for s in ranked["steps"] if s["simulated"])
    print(f"\nreal runs: {truth['budget']['runs_used']} without --simulate-first, "
          f"{ranked['budget']['runs_used']} with it (+{ranked['budget']['simulated_runs']} simulated)")


def test_the_json_is_the_documented_contract(truth, tmp_path):
    keys = {"schema", "name", "started", "servelab_version", "objective", "engine", "workload", "plan_check",
            "baseline", "steps", "final", "operating_point", "next", "stopped_because", "budget", "limits", "noise"}
    assert keys <= set(truth)
    step_keys = {"n", "verdict", "evidence", "change", "config", "result", "gain", "noise_verdict", "kept", "why",
                 "simulated"}
    assert all(step_keys <= set(s) for s in truth["steps"])
    assert {"engine_args", "env", "client", "output_tok_s", "serve_command"} <= set(truth["final"])
    assert truth["noise"]["floor"] == 0.1 and truth["noise"]["repeats"] == 2
    assert json.loads(json.dumps(truth)) == truth


class CutAt(Counting):
    """Ctrl-C during the n-th measurement."""

    def __init__(self, plan: OptimizePlan, n: int) -> None:
        super().__init__(plan)
        self.n = n

    def measure(self, config, repeats):
        if len(self.asked) + 1 == self.n:
            raise KeyboardInterrupt
        return super().measure(config, repeats)


def test_ctrl_c_writes_what_was_done_and_a_rerun_goes_on(tmp_path, plan_of):
    plan = plan_of(tmp_path, "cut", budget_runs=8)
    with pytest.raises(KeyboardInterrupt):
        optimize(plan, CutAt(plan, 3), say=lambda _: None)
    cut = json.loads((tmp_path / "cut" / "optimize.json").read_text())
    assert cut["stopped_because"] == "interrupted" and len(cut["steps"]) == 1 and cut["final"] is not None
    measurer = Counting(plan)
    done = optimize(plan, measurer, say=lambda _: None)
    assert done["steps"][0] == cut["steps"][0] and len(measurer.asked) == len(done["steps"]) - 1
    assert done["stopped_because"] == "budget: runs"


class FailsToStart(Counting):
    """An engine that will not start with --max-num-seqs 4 (as a config past memory would not)."""

    def measure(self, config, repeats):
        from servelab.errors import EngineError

        if "4" in config.engine_args[config.engine_args.index("--max-num-seqs") + 1:][:1]:
            raise EngineError("engine 'sim' exited during startup (code 1)\nlast log lines: …")
        return super().measure(config, repeats)


def test_a_configuration_that_cannot_start_is_reverted_and_the_loop_goes_on(tmp_path, plan_of):
    plan = plan_of(tmp_path, "infeasible", budget_runs=6)
    record = optimize(plan, FailsToStart(plan), say=lambda _: None)
    first = record["steps"][0]
    assert first["change"]["to"] == "4" and first["kept"] is False and first["noise_verdict"] is None
    assert "the engine did not run with it (engine 'sim' exited during startup (code 1))" in first["why"]
    assert record["steps"][1]["change"]["name"] == "--max-num-batched-tokens"  # the table's next change
