"""optimize's keep rule with quality: faster beyond noise AND, for a knob that can change the
answers, the same answers within the best's own floor.

The stand-in engine (``StandIn``) answers 50 prompts per run without a server: a faster
``--kv-cache-dtype fp8`` whose answers are corrupted for 20 % of the prompts (rejected for
quality), a faster ``--max-num-seqs`` whose answers are identical (kept); both 1.5× faster,
far past the noise rule. Its answers are those a greedy run keeps with --save-detailed
(quality/responses.py's section), so the judge is the one a real run gets.
"""

from __future__ import annotations

import dataclasses
import json

from servelab.optimize.loop import optimize
from servelab.optimize.measure import EngineMeasurer, Repeats, SimMeasurer
from servelab.optimize.prerank import Prerank
from servelab.optimize.quality_check import decision
from servelab.optimize.report import write_report

PROMPTS = [f"k{i}" for i in range(50)]


def answer(prompt: str, corrupted: bool) -> str:
    return f"answer to {prompt}" + (" garbled" if corrupted else " in full")


class StandIn:
    """A Measurer (optimize/measure.py's protocol) of known truth: the speed and the answers
    each configuration gives."""

    simulated = False
    engine_starts = 0

    def __init__(self, verdict: str, evidence: dict) -> None:
        self.verdict, self.evidence = verdict, evidence

    def measure(self, config, repeats: int) -> Repeats:
        args = list(config.engine_args)
        fp8 = "fp8" in args
        faster = fp8 or args[args.index("--max-num-seqs") + 1] != "2"
        tok_s = 150.0 if faster else 100.0
        corrupt = {p for i, p in enumerate(PROMPTS) if fp8 and i % 5 == 0}
        limit = "no-limit-found" if faster else self.verdict
        results = tuple(self._result(tok_s + r, limit, corrupt) for r in range(repeats))
        return Repeats(results, tuple(f"run{r}" for r in range(repeats)), False, (True,) * repeats)

    def _result(self, tok_s: float, verdict: str, corrupt: set[str]) -> dict:
        texts = [answer(p, p in corrupt) for p in PROMPTS]
        diagnosis = {"verdict": verdict, "verdicts": [{"summary": verdict, "evidence": self.evidence}], "checked": []}
        return {"output_throughput": tok_s, "request_throughput": tok_s / 10, "mean_ttft_ms": 10.0,
                "mean_tpot_ms": 5.0, "request_goodput": 0.0, "generated_texts": texts, "errors": [""] * len(texts),
                "servelab": {"diagnosis": diagnosis, "responses": {
                    "keys": PROMPTS, "prompts": PROMPTS, "key_of": "token_ids",
                    "sampling": {"temperature": 0.0, "seed": None, "greedy": True}}}}

    def close(self) -> None:
        pass


def real_plan(plan_of, tmp, name):
    plan = plan_of(tmp, name, budget_runs=8)
    return dataclasses.replace(plan, kind="vllm", fast=False)


def test_a_faster_fp8_kv_cache_that_corrupts_a_fifth_of_answers_is_rejected(plan_of, tmp_path):
    record = optimize(real_plan(plan_of, tmp_path, "fp8"), StandIn("memory-bandwidth-bound", {}), say=lambda _: None)
    step = record["steps"][0]
    assert step["change"]["name"] == "--kv-cache-dtype" and step["noise_verdict"] == "better"
    assert step["quality"]["verdict"] == "diverges beyond it" and step["quality"]["alters_outputs"] is True
    assert (step["quality"]["identical"], step["quality"]["paired"], step["quality"]["floor"]) == (40, 50, 1.0)
    assert step["kept"] is False and "reverted for quality" in step["why"]


def test_a_faster_max_num_seqs_with_identical_answers_is_kept(plan_of, tmp_path):
    standin = StandIn("scheduler-cap", {"limit": "max_num_seqs", "max_num_seqs": 2})
    record = optimize(real_plan(plan_of, tmp_path, "seqs"), standin, say=lambda _: None)
    step = record["steps"][0]
    assert step["change"]["name"] == "--max-num-seqs" and step["noise_verdict"] == "better"
    assert step["quality"] == {"alters_outputs": False, "verdict": "same within its own variation", "floor": 1.0,
                               "blocks": False, "identical": 50, "paired": 50, "share": 1.0, "prefix_share": 1.0}
    assert step["kept"] is True and step["why"].endswith("— kept")


def test_an_output_changing_step_without_kept_answers_is_not_kept(plan_of, tmp_path):
    class Mute(StandIn):
        def _result(self, *a):
            r = super()._result(*a)
            del r["servelab"]["responses"]
            return r

    record = optimize(real_plan(plan_of, tmp_path, "mute"), Mute("memory-bandwidth-bound", {}), say=lambda _: None)
    step = record["steps"][0]
    assert step["quality"]["verdict"].startswith("quality not judged: ") and "--save-detailed" in step["quality"]["verdict"]
    assert step["kept"] is False


def test_a_step_rejected_for_quality_says_so_in_its_record_table_and_page(plan_of, tmp_path):
    plan = real_plan(plan_of, tmp_path, "said")
    optimize(plan, StandIn("memory-bandwidth-bound", {}), say=lambda _: None)
    step = json.loads((plan.folder / "optimize.json").read_text())["steps"][0]
    assert step["decision"] == "rejected (quality)" and step["noise_verdict"] == "better"
    html, md = write_report(plan.folder)
    row = next(line for line in md.read_text().splitlines() if line.startswith("| 1 "))
    assert row.rstrip(" |").endswith("| rejected (quality; better)") and "reverted" not in row
    assert "0 kept, 0 reverted, 1 rejected for quality (faster, answers diverge beyond the floor)" in md.read_text()
    assert "### Step 1: --kv-cache-dtype auto → fp8 — rejected (quality)" in md.read_text()
    assert '<td class="txt worse">rejected (quality; better)</td>' in html.read_text()  # red, not green
    assert "reverted (better)" not in html.read_text()


def test_a_step_kept_or_reverted_on_speed_keeps_its_words(plan_of, tmp_path):
    standin = StandIn("scheduler-cap", {"limit": "max_num_seqs", "max_num_seqs": 2})
    record = optimize(real_plan(plan_of, tmp_path, "words"), standin, say=lambda _: None)
    assert [s["decision"] for s in record["steps"]] == ["kept"]
    assert decision({"kept": False, "noise_verdict": "within noise", "quality": {"blocks": True,
                     "verdict": "diverges beyond it"}}) == "reverted"  # not faster: reverted on speed


def test_simulate_first_sends_an_output_changing_change_to_a_real_run_that_judges_it(plan_of, tmp_path):
    """The simulator cannot rank a kv-cache dtype: it is measured for real, and its answers judged."""
    plan = dataclasses.replace(real_plan(plan_of, tmp_path, "first"), simulate_first=True)
    presim = Prerank(SimMeasurer(plan.name + "/presim", plan.results, plan.engine, plan.spec, plan.slo))
    record = optimize(plan, StandIn("memory-bandwidth-bound", {}), say=lambda _: None, prerank=presim)
    fp8 = [s for s in record["steps"] if s["change"]["name"] == "--kv-cache-dtype"]
    assert [(s["simulated"], s["quality"]["verdict"], s["decision"]) for s in fp8] == [
        (False, "diverges beyond it", "rejected (quality)")]
    assert not any(s["kept"] for s in record["steps"])


def test_the_simulated_engine_served_in_real_time_judges_no_answers(plan_of, tmp_path):
    """``--engine sim`` without ``--simulate``: a server, but no weights run: its answers prove nothing."""
    plan = plan_of(tmp_path, "served")
    assert EngineMeasurer(plan.name, tmp_path, plan.engine, plan.spec, None, print).simulated is True
    vllm = dataclasses.replace(plan.engine, spec=dataclasses.replace(plan.engine.spec, kind="vllm"))
    assert EngineMeasurer(plan.name, tmp_path, vllm, plan.spec, None, print).simulated is False
