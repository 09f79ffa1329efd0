"""``servelab optimize``: the consultancy method as one loop.

    plan check → baseline (repeats) + diagnosis → the knob table's changes for the verdict,
    one at a time, each under identical load (same requests, same seed) with repeats →
    kept only when better beyond noise (compare's rule), else reverted → after a kept
    change, diagnose again (the limit moves) → stop: no untried change for the verdict,
    no limit found, or the budget → the operating point on the best configuration.

Every step is written to ``optimize.json`` as it ends. A rerun with the same definition
replays the recorded steps in order — their results and decisions as recorded, never
re-decided on new noise — and goes on from the first step not recorded. The measurer's
sessions stop their engines on every way out; Ctrl-C writes what was done so far.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from servelab.diagnose.changes import CLIENT, MODEL, key_of, remedy
from servelab.errors import EngineError, InputError
from servelab.optimize import record as rec
from servelab.optimize.config import Config, Move, apply, engine_defaults, known, next_value
from servelab.optimize.measure import Measurer, config_tag
from servelab.optimize.plan import OptimizePlan, definition, head
from servelab.optimize.quality_check import judge as judge_quality
from servelab.optimize.steps import Seen, compare, seen, seen_from_step, step_dict, why_text

NO_CHANGE, NO_LIMIT, OUT_OF_RUNS, OUT_OF_TIME, INTERRUPTED, FAILED = (
    "no untried change for the verdict", "no limit found", "budget: runs", "budget: minutes", "interrupted",
    "failed")


@dataclass(slots=True)
class State:
    plan: OptimizePlan
    measurer: Measurer
    record: dict
    replay: list[dict]  # recorded steps not yet replayed (resume)
    say: Callable[[str], None]
    started: float = field(default_factory=time.monotonic)
    minutes_before: float = 0.0
    tried: set = field(default_factory=set)  # (config, change, value) already measured
    starts_before: int = 0  # engine starts of the runs a resumed record already holds

    @property
    def minutes(self) -> float:
        return self.minutes_before + (time.monotonic() - self.started) / 60

    def save(self) -> None:
        b = self.record["budget"]
        b["minutes_used"] = round(self.minutes, 3)
        b["engine_starts"] = self.starts_before + self.measurer.engine_starts
        rec.write(self.plan.folder, self.record)


def optimize(plan: OptimizePlan, measurer: Measurer, say: Callable[[str], None] = print,
             prerank=None) -> dict:
    """Run (or resume) the loop; returns the record, also in ``results/NAME/optimize.json``."""
    state = _state(plan, measurer, say)
    try:
        best = _baseline(state)
        state.record["stopped_because"] = _walk(state, best, prerank)
        best = _best(state)
        if plan.operating_point and not state.record["stopped_because"].startswith("budget"):
            from servelab.optimize.operating import operating_point

            state.record["operating_point"] = operating_point(state, best)
    except KeyboardInterrupt:
        state.record["stopped_because"] = INTERRUPTED
        raise
    except Exception as exc:  # an engine that cannot start (a port taken), a run that failed: said, then raised
        state.record["stopped_because"] = f"{FAILED}: " + (str(exc).split("\n", 1)[0] or type(exc).__name__)
        raise
    finally:
        try:
            measurer.close()  # stops the engine; may raise (a port still taken) …
        finally:
            _finish(state)  # … and the record is written all the same
    return state.record


def _state(plan: OptimizePlan, measurer: Measurer, say) -> State:
    old = previous(plan)
    record = head(plan)
    replay: list[dict] = []
    if old is not None:
        replay = [old["baseline"], *old.get("steps", [])] if old.get("baseline") else []
        record["objective"] = old.get("objective", record["objective"])
        say(f"resuming: {len(replay)} recorded steps are replayed as recorded")
        state = State(plan, measurer, record, replay, say, minutes_before=old["budget"].get("minutes_used", 0.0),
                      starts_before=old["budget"].get("engine_starts", 0))
    else:
        state = State(plan, measurer, record, replay, say)
    if plan.plan_check is not None:
        record["plan_check"] = plan.plan_check
    return state


def previous(plan: OptimizePlan) -> dict | None:
    """The record this plan resumes (None: none yet). Another definition under the same --name is
    refused, before anything runs or is written: its record and note stay, its runs are not read."""
    old = rec.read(plan.folder)
    if old is not None and old.get("definition") != definition(plan):
        raise InputError(f"--name {plan.name}: {plan.folder / rec.FILE} records another optimization (its engine, "
                         "workload or flags differ): rerun that command to resume it, or give another --name "
                         f"(or delete {plan.folder}) to start anew")
    return old


def _baseline(state: State) -> Seen:
    plan, record = state.plan, state.record
    config = plan.base_config
    if state.replay:
        step = state.replay.pop(0)
        record["baseline"], base = step, seen_from_step(step)
        record["budget"]["runs_used"] += step["result"]["repeats"]
        state.say(f"baseline (recorded): {_line(step)}")
        return base
    state.say(f"baseline: {plan.repeats} runs")
    m = state.measurer.measure(config, plan.repeats)
    record["budget"]["runs_used"] += m.fresh
    base = seen(config, m)
    record["objective"] = objective_for(plan, base)
    record["noise"] = rec.noise_rule(plan.repeats, record["objective"]["kind"])
    record["baseline"] = reused(state, step_dict(0, base, None, base, m, None, "the configuration as given"), m)
    state.say(f"baseline: {_line(record['baseline'])}; verdict {base.verdict}")
    state.save()
    return base


def objective_for(plan: OptimizePlan, base: Seen) -> dict:
    """With a finite --request-rate the engine keeps up with, every knob gives the same throughput:
    then the objective is latency (goodput with --slo), and it says so."""
    slo = plan.slo or None
    rate, req_s = plan.spec.load.request_rate, _req_per_s(base)
    if plan.objective == "throughput" and math.isfinite(rate) and req_s >= 0.9 * rate:
        kind, what = ("goodput", "goodput under the SLO") if slo else ("latency", "mean TTFT")
        return {"kind": kind, "slo": slo, "why": f"finite --request-rate {rate:g} below capacity (served "
                f"{req_s:.2f} req/s): throughput is flat, optimising {what}"}
    why = {"throughput": "output tok/s of the fixed workload, the default objective",
           "goodput": "requests per second meeting every SLO (--objective goodput)",
           "latency": "mean TTFT (--objective latency)"}[plan.objective]
    return {"kind": plan.objective, "slo": slo, "why": why}


def _req_per_s(s: Seen) -> float:
    return _mean(s.values.get("request_throughput", ()))


def _mean(xs) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def _walk(state: State, best: Seen, prerank) -> str:
    """Act on each verdict until a stop: returns ``stopped_because``."""
    best = _replayed(state, best)
    while True:
        if best.verdict == "no-limit-found":
            return NO_LIMIT
        moves = untried(state, best)
        if moves and prerank is not None:
            moves = prerank(state, best, moves)
        if not moves:
            return NO_CHANGE
        for move in moves:
            stop = _over_budget(state)
            if stop:
                return stop
            cand = _try(state, best, move)
            if _kept(state):
                best = cand
                break
            paired = _pair(state, best, move, cand)
            if paired is not None:
                best = paired
                break


def _pair(state: State, best: Seen, first: Move, cand: Seen) -> Seen | None:
    """A change that bought nothing but moved the limit (its run names another verdict) is
    tried once more together with the next limit's first change: two limits that bind
    together (the client's cap and max_num_seqs, a KV cache and the token budget) give way
    only together. Kept only when the pair is better beyond noise than the best."""
    if cand.verdict in (best.verdict, "no-limit-found"):
        return None
    second = untried(state, cand)
    if not second or _over_budget(state):
        return None
    paired = _try(state, best, second[0], on=cand, first=first)
    return paired if _kept(state) else None


def _kept(state: State) -> bool:
    return state.record["steps"][-1]["kept"]


def _replayed(state: State, best: Seen) -> Seen:
    """The recorded steps, in order, as recorded: their results and decisions are not re-made."""
    while state.replay:
        step = state.replay.pop(0)
        state.record["steps"].append(step)
        if step.get("simulated"):
            state.record["budget"]["simulated_runs"] += step["result"].get("repeats", 1)
        else:
            state.record["budget"]["runs_used"] += step["result"]["repeats"]
        state.tried.add(tuple(step["tried"]))
        state.say(f"step {step['n']} (recorded): {step['why']}")
        if step["kept"] and not step.get("simulated"):
            best = seen_from_step(step)
    return best


def untried(state: State, best: Seen) -> list[Move]:
    """The table's changes for this verdict, each at its schedule's next value, not measured before."""
    plan = state.plan
    out = []
    for change in remedy(plan.kind, key_of(best.verdict, best.evidence)).changes:
        if change.kind != CLIENT and plan.knobs is not None and change.name.lstrip("-") not in plan.knobs:
            continue  # a command engine: only the flags its user says exist
        if change.kind == MODEL:
            out += _models(state, best, change)
            continue
        if change.name == "workers" and plan.fast:
            continue  # the simulator has no client processes to split
        old = known(best.config, change, best.evidence, plan.base_config, frozenset(plan.from_command),
                    best.reported, engine_defaults(plan.kind, plan.device))
        new = next_value(change, old.value)
        if change.name == "max_concurrency" and new is not None and int(new) > plan.spec.dataset.num_prompts:
            continue  # more slots than requests is no more load
        if new is not None and (*_where(best.config), change.name, new) not in state.tried:
            out.append(Move(change, old.value, new, old.source))
    return out


def _models(state: State, best: Seen, change) -> list[Move]:
    """The checkpoints the user named (``--alternative-model``), each served instead of the one
    the best runs, in the order given; none when none was named."""
    serving = best.config.model or state.plan.base_model
    return [Move(change, serving, m) for m in state.plan.alternative_models
            if m != serving and (*_where(best.config), change.name, m) not in state.tried]


def _where(config: Config) -> tuple:
    return (config_tag(config), config.max_concurrency, config.workers)


def _over_budget(state: State) -> str | None:
    plan, used = state.plan, state.record["budget"]["runs_used"]
    if state.replay:
        return None  # recorded steps were within the budget when they ran
    if plan.budget_runs is not None and used + plan.repeats > plan.budget_runs:
        return OUT_OF_RUNS
    if plan.budget_minutes is not None and state.minutes >= plan.budget_minutes:
        return OUT_OF_TIME
    return None


def _try(state: State, best: Seen, move: Move, on: Seen | None = None, first: Move | None = None) -> Seen:
    """One candidate (``move`` made on the best, or on ``on``: a pair), measured, compared with
    the best by compare's rule, recorded and written."""
    base = on or best
    config = apply(base.config, move, base.evidence)
    tried = (*_where(base.config), move.change.name, move.new)
    state.tried.add(tried)
    steps, repeats = state.record["steps"], state.plan.repeats
    label = f"{first.label} + {move.label}" if first else move.label
    state.say(f"step {len(steps) + 1}: {base.verdict} → try {label} ({repeats} runs)")
    try:
        m = state.measurer.measure(config, repeats)
    except EngineError as exc:  # this configuration cannot start (or died): reverted, and the loop goes on
        return _infeasible(state, base, move, config, tried, exc)
    cand = seen(config, m)
    judged = compare(best, cand, _kind(state))
    alters = move.change.alters_outputs or (first is not None and first.change.alters_outputs)
    quality = judge_quality(best.results, cand.results, alters, state.measurer.simulated)
    step = step_dict(len(steps) + 1, base, move, cand, m, judged,
                     why_text(move, judged, _kind(state), first, quality), quality=quality)
    step["tried"] = list(tried)
    if first is not None:
        step["with"] = first.to_dict()  # the reverted change this one was paired with
    state.record["budget"]["runs_used"] += m.fresh
    steps.append(reused(state, step, m))
    state.say(f"  {step['why']}")
    state.save()
    return cand


def reused(state: State, step: dict, m) -> dict:
    """Runs read back instead of measured (this definition's, done before: an interrupted run's, or a
    load the operating point measured) are said on screen and in the step (``reused_runs``)."""
    again = [run for run, new in zip(m.runs, m.fresh_flags) if not new]
    if again:
        step["reused_runs"] = again
        state.say(f"  reused {len(again)} run(s) this optimization measured before (same definition): "
                  + ", ".join(again))
    return step


def _infeasible(state: State, base: Seen, move: Move, config: Config, tried: tuple, exc: EngineError) -> Seen:
    reason = str(exc).split("\n", 1)[0]
    cand = Seen(config, {}, "infeasible", {}, (reason,))
    step = step_dict(len(state.record["steps"]) + 1, base, move, cand, None, None,
                     f"{move.label}: the engine did not run with it ({reason}) — reverted")
    step["result"].update(output_tok_s=0.0, mean_ttft_ms=0.0, mean_tpot_ms=0.0, repeats=0, runs=[])
    step["tried"] = list(tried)
    state.record["steps"].append(step)
    state.say(f"  {step['why']}")
    state.save()
    return cand


def _kind(state: State) -> str:
    return state.record["objective"]["kind"]


def _best(state: State) -> Seen:
    """The last kept configuration (the baseline if none was kept)."""
    kept = [s for s in state.record["steps"] if s["kept"] and not s.get("simulated")]
    return seen_from_step(kept[-1] if kept else state.record["baseline"])


def _finish(state: State) -> None:
    """``final`` and ``next`` from the best verified configuration; written."""
    from servelab.optimize.plan import final_section

    if state.record.get("baseline"):
        best_step = next((s for s in reversed(state.record["steps"]) if s["kept"] and not s.get("simulated")),
                         state.record["baseline"])
        state.record.update(final_section(state.plan, best_step, state.record.get("operating_point")))
    state.save()


def _line(step: dict) -> str:
    r = step["result"]
    return (f"{r['output_tok_s']:.1f} out tok/s, mean TTFT {r['mean_ttft_ms']:.0f} ms, "
            f"mean TPOT {r['mean_tpot_ms']:.1f} ms ({r['repeats']} runs)")
