"""What each section of the optimize note says, from optimize.json's fields: sentences and
tables of strings, pure functions of the record (no files, no plots), so the Markdown and
the page say the same and a test can read each sentence.

A field the loop may not have written yet (no baseline, no final, no stop: it rewrites the
record after every step) is said as such, never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from servelab.optimize.quality_check import NOT_KEPT, REJECTED
from servelab.optimize.quality_check import decision as decision_of
from servelab.search.table import markdown as md_table
from servelab.search.table import num

# What a step's gain is the ratio of, per objective (the loop compares on it; a latency gains below 1).
OBJECTIVE_METRIC = {"throughput": "output tok/s", "goodput": "goodput", "latency": "mean TTFT"}
LOAD_NAMES = {"concurrency": "concurrency", "rate": "request rate (req/s)"}
RESULT_COLUMNS = (("output_tok_s", "out tok/s", 1), ("mean_ttft_ms", "mean TTFT ms", 0),
                  ("mean_tpot_ms", "mean TPOT ms", 1))
# A step's result may carry each repeat's value (result.values), under the run result's names.
REPEAT_VALUES = {"output_tok_s": "output_throughput", "mean_ttft_ms": "mean_ttft_ms", "mean_tpot_ms": "mean_tpot_ms"}
SPREAD_NOTE = "cells: mean ± half-range over the repeats where each repeat's value was recorded"


@dataclass(slots=True)
class Table:
    """A table people paste: a header and rows of strings; ``mark`` is the row index to highlight."""

    header: list[str]
    rows: list[list[str]]
    text: tuple[str, ...] = ()  # columns of words (left-aligned), the rest numbers
    mark: int | None = None
    notes: list[str] = field(default_factory=list)  # what the cells mean, under the table

    def markdown(self) -> str:
        table = md_table(self.header, [[c.replace("|", "\\|") for c in r] for r in self.rows], self.text)
        return "\n".join([table, *([""] if self.notes else []), *(f"- {x}" for x in self.notes)])



def sim_engine(doc: dict) -> bool:
    return doc["engine"]["kind"] == "sim" or bool(doc["engine"].get("simulated"))


def all_steps(doc: dict) -> list[dict]:
    return ([doc["baseline"]] if doc.get("baseline") else []) + list(doc["steps"])


def _metric(doc: dict) -> str:
    return OBJECTIVE_METRIC.get(doc["objective"]["kind"], doc["objective"]["kind"])


def band(doc: dict) -> float:
    """The floor the objective's gain had to clear, as the loop used it (compare's; twice it for a latency)."""
    return float(doc["noise"]["floor"])


def cell(result: dict, key: str, digits: int) -> str:
    """``mean ± half-range`` over the recorded repeats, as compare's tables show it; the mean alone without them."""
    values = [v for v in (result.get("values") or {}).get(REPEAT_VALUES[key]) or [] if v is not None]
    text = num(result.get(key), digits)
    return text + f" ± {num((max(values) - min(values)) / 2, digits)}" if len(values) > 1 else text


def pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.1f} %".replace("-", "−")  # a real minus sign


def share(x: float) -> str:
    return f"{x * 100:g} %"


def gain_text(gain: float | None) -> str:
    return "-" if gain is None else f"{gain:.2f}× ({pct(gain)})"


def change_text(change: dict | None) -> str:
    """``--max-num-seqs 2 → 8``, ``VLLM_CPU_KVCACHE_SPACE=4 → 8``, ``client --max-concurrency 2 → 8``."""
    if not change:
        return "-"
    old = "(unset)" if change.get("from") in (None, "") else change["from"]
    name, also = change["name"], f" (with {', '.join(change['also'])})" if change.get("also") else ""  # raised together
    if change["kind"] == "env":
        return f"{name}={old} → {change['to']}{also}"
    if change["kind"] == "model":  # another checkpoint served, under the same requests
        return f"model {old} → {change['to']} (engine restarted)"
    if change["kind"] == "client":
        flag = name if name.startswith("--") else "--" + name.replace("_", "-")
        return f"client {flag} {old} → {change['to']}{also}"
    return f"{name} {old} → {change['to']}{also}"


def step_change(step: dict) -> str:
    """The step's change, and the one it was paired with (``with``: a change that moved the limit alone)."""
    paired = step.get("with")
    return change_text(step.get("change")) + (f", with {change_text(paired)}" if paired else "")


def decision(step: dict, is_baseline: bool) -> str:
    """The call and what it rests on: ``kept (better)``, ``reverted (within noise)``, ``not measured (SIMULATED)``,
    ``rejected (quality; better)``: faster beyond noise, but its answers diverge beyond the floor."""
    tags = [step["noise_verdict"]] if step.get("noise_verdict") else []
    tags += ["SIMULATED"] if step.get("simulated") else []
    call = _call(step, is_baseline)
    if tags and call.endswith(")"):  # "rejected (quality)": the tags join its parenthesis
        return f"{call[:-1]}; {', '.join(tags)})"
    return f"{call} ({', '.join(tags)})" if tags else call


def _call(step: dict, is_baseline: bool) -> str:
    """start, or the step's decision (quality_check.decision; a record from before it was written derives it)."""
    return "start" if is_baseline else step.get("decision") or decision_of(step)


def steps_table(doc: dict) -> Table:
    """One row per configuration tried, the baseline first: what changed, what it measured, the call."""
    header = ["step", "verdict", "change", *(h for _, h, _ in RESULT_COLUMNS), "repeats",
              f"gain ({_metric(doc)})", "decision (noise verdict)"]
    rows = []
    for step in all_steps(doc):
        first = step is doc.get("baseline")
        res = step["result"]
        rows.append(["baseline" if first else str(step["n"]), step.get("verdict") or "-",
                     step_change(step),
                     *(cell(res, k, d) for k, _, d in RESULT_COLUMNS), str(res.get("repeats", "-")),
                     gain_text(step.get("gain")), decision(step, first)])
    spread = any((s["result"].get("values") or {}) for s in all_steps(doc))
    return Table(header, rows, text=("verdict", "change", header[-1]),
                 notes=[SPREAD_NOTE] if spread else [])


def details(doc: dict) -> list[dict]:
    return [step_detail(doc, s) for s in all_steps(doc)]


def step_detail(doc: dict, step: dict) -> dict:
    """A step as a paragraph: the verdict it acted on, what was changed (and where its value was read),
    what it measured, the call — and under it the evidence of its own runs' diagnosis, not the one it
    acted on (that is listed under the step, or the baseline, that measured it)."""
    first = step is doc.get("baseline")
    res, floor = step["result"], band(doc)
    heading = "Baseline" if first else f"Step {step['n']}: {step_change(step)} — {_call(step, False)}"
    measured = (f"{num(res.get('output_tok_s'))} output tok/s, mean TTFT {num(res.get('mean_ttft_ms'), 0)} ms, "
                f"mean TPOT {num(res.get('mean_tpot_ms'))} ms over {res.get('repeats', '?')} "
                f"{'prediction' if step.get('simulated') else 'repeat'}(s)")
    said = "Predicted" if step.get("simulated") else "Measured"
    after = step.get("diagnosis_after") or {}
    if first:
        lines = [f"Verdict: {step.get('verdict') or 'none'}.", f"{said}: {measured}.",
                 f"Configuration: {config_text(step['config'])}."]
        evidence = step.get("evidence") or []
    else:
        lines = [f"Acted on: {step.get('verdict') or 'none'}, the diagnosis of the best configuration so far.",
                 *_source(step.get("change")), f"{said}: {measured}.",
                 f"Gain on {_metric(doc)}: {gain_text(step.get('gain'))} against the configuration it "
                 f"was compared with; noise band ±{share(floor)} → {step.get('noise_verdict') or 'not judged'}.",
                 f"Why: {step.get('why') or 'no reason recorded'}."]
        lines += [f"Diagnosis of its own runs: {after['verdict']}."] if after.get("verdict") else []
        evidence = after.get("evidence") or []
    reused = step.get("reused_runs") or []
    lines += [f"Reused: {len(reused)} run(s) this optimization measured before (same definition), read back, "
              "not measured again."] if reused else []
    return {"heading": heading, "simulated": bool(step.get("simulated")), "lines": lines,
            "evidence": list(evidence), "runs": list(res.get("runs") or [])}


def _source(change: dict | None) -> list[str]:
    """Where the value the change stepped from was read (the loop records it): a default is a guess."""
    if not change or not change.get("from_source"):
        return []
    return [f"Stepped from {change.get('from') or 'unset'} (source: {change['from_source']})."]


def config_text(config: dict) -> str:
    """``engine --max-num-seqs 2; env VLLM_CPU_KVCACHE_SPACE=4; client --max-concurrency 16, --workers default``."""
    env = " ".join(f"{k}={v}" for k, v in sorted((config.get("env") or {}).items()))
    parts = ["engine " + (" ".join(config.get("engine_args") or []) or "as started")]
    parts += [f"env {env}"] if env else []
    parts += [f"model {config['model']}"] if config.get("model") else []  # after a model change
    return "; ".join(parts + [_client_flags(config.get("client") or {})])


def _quality_calls(calls: list[str]) -> str:
    """The changes faster beyond noise that were not kept for their answers, when any were."""
    rejected, unjudged = calls.count(REJECTED), calls.count(NOT_KEPT)
    return ((f", {rejected} rejected for quality (faster, answers diverge beyond the floor)" if rejected else "")
            + (f", {unjudged} not kept: faster, but their answers could not be judged" if unjudged else ""))


def summary(doc: dict) -> list[str]:
    """The answer first: how far it moved, in how many steps, why it stopped, what it cost."""
    steps, base, final = doc["steps"], doc.get("baseline"), doc["final"]
    calls = [_call(s, False) for s in steps]
    ranked = calls.count("not measured")
    out = [_headline(doc, base, final),
           f"{len(steps)} change(s) tried after the baseline: {calls.count('kept')} kept, "
           f"{calls.count('reverted')} reverted" + _quality_calls(calls)
           + (f", {ranked} only ranked on the simulator (SIMULATED, not measured)" if ranked else "") + ".",
           stopped_text(doc), f"Budget: {budget_text(doc['budget'])}"]
    if not doc["engine"].get("restartable", True):
        out.append("The engine is external (servelab cannot restart it): only the client's side — its "
                   "concurrency and workers — was optimised; the engine's configuration is as found.")
    if doc["stopped_because"] == "interrupted":
        out.append("Interrupted: this is the best verified configuration so far, not a finished answer.")
    return out


def _headline(doc: dict, base: dict | None, final: dict) -> str:
    if base is None:
        return "No baseline finished: nothing was measured to compare with."
    kind = doc["objective"]["kind"]
    if kind == "latency":
        now = final_result(doc) or {}
        b, f = base["result"]["mean_ttft_ms"], now.get("mean_ttft_ms")
        tail = "-" if f is None or not b else f"{num(f, 0)} ms ({f / b:.2f}×, {pct(f / b)})"
        why = doc["objective"].get("why")
        return f"Mean TTFT {num(b, 0)} ms → {tail} under the same load." + (
            f" Why this objective: {why}." if why else "")
    b, f = base["result"]["output_tok_s"], final.get("output_tok_s")
    at_base = _load(base["config"].get("client") or {})
    if f is None:
        return f"Output throughput {num(b)} tok/s at the baseline ({at_base}); no change verified yet."
    ratio = f"{f / b:.2f}×, {pct(f / b)}" if b else "-"
    return (f"Output throughput {num(b)} tok/s at the baseline ({at_base}) → {num(f)} tok/s with the final "
            f"configuration ({_load(final.get('client') or {})}) ({ratio}) under the same workload."
            + _at_operating_point(doc, b, final) + _latency_cost(doc, base["result"]))


def _load(client: dict) -> str:
    c = client.get("max_concurrency")
    return f"client concurrency {c}" if c is not None else "no client concurrency cap"


def _at_operating_point(doc: dict, b: float, final: dict) -> str:
    """The operating point, when measured on the final configuration at another load than the client's,
    stated with its load: the summary's numbers then match the table below it."""
    op = doc.get("operating_point") or {}
    if op.get("load") is None or op.get("output_tok_s") is None:
        return ""
    if op.get("over") == "concurrency" and op["load"] == (final.get("client") or {}).get("max_concurrency"):
        return ""  # the final client's own load: the sentence before says it
    ratio = f" ({op['output_tok_s'] / b:.2f}× the baseline)" if b else ""
    return (f" At its operating point, {LOAD_NAMES.get(op['over'], op['over'])} {op['load']:g}, it measured "
            f"{num(op['output_tok_s'])} tok/s{ratio}.")


def _latency_cost(doc: dict, base: dict) -> str:
    """What a throughput gain cost in latency: each mean that rose by more than the noise floor."""
    now, floor = final_result(doc) or {}, band(doc)
    costs = [f"{label} {pct(now[key] / base[key])}" for key, label in (("mean_tpot_ms", "mean TPOT"),
                                                                       ("mean_ttft_ms", "mean TTFT"))
             if base.get(key) and now.get(key) is not None and now[key] / base[key] > 1 + floor]
    return f" Latency cost: {', '.join(costs)} against the baseline." if costs else ""


def stopped_text(doc: dict) -> str:
    if doc["stopped_because"] is None:  # the loop rewrites the record, and this note, after every step
        return "Still running: this note is rewritten after every step; below is the answer so far."
    return f"Stopped because: {doc['stopped_because']}."


def budget_text(b: dict) -> str:
    runs = (f"{b['runs_used']} of {b['runs_limit']}" if b.get("runs_limit") is not None
            else f"{b['runs_used']} (no limit)")
    minutes = (f"{num(b['minutes_used'])} of {num(b['minutes_limit'])} minutes" if b.get("minutes_limit") is not None
               else f"{num(b['minutes_used'])} minutes (no limit)")
    return (f"{runs} measured runs (each repeat counts one), {minutes}; "
            f"{b.get('engine_starts', 0)} engine start(s); {b.get('simulated_runs', 0)} simulated run(s), not counted.")


def final_result(doc: dict) -> dict | None:
    """The measured result of the final configuration: the step it names (``from_step``), else the last
    step (or the baseline) that ran the same configuration."""
    steps, named = all_steps(doc), doc["final"].get("from_step")
    if named is not None:
        return next((s["result"] for s in steps if s.get("n") == named), None)
    want = {k: doc["final"].get(k) for k in ("engine_args", "env", "client", "model")}
    return next((s["result"] for s in reversed(steps) if {k: s["config"].get(k) for k in want} == want), None)


def _client_flags(client: dict) -> str:
    parts = [f"--max-concurrency {client['max_concurrency']}" if client.get("max_concurrency") is not None
             else "no --max-concurrency cap",
             f"--workers {client['workers']}" if client.get("workers") is not None else "--workers default"]
    return "client " + ", ".join(parts)


def client_text(client: dict) -> str:
    return (f"Client: {_client_flags(client).removeprefix('client ')} (free variables: the load this deployment "
            "serves, not engine settings).")


def serve_command(doc: dict) -> str:
    """The line that serves the final configuration; none for an engine servelab does not start."""
    return doc["final"].get("serve_command") or "" if doc["engine"].get("restartable", True) else ""


def final_lines(doc: dict) -> list[str]:
    final = doc["final"]
    if not final:
        return ["No configuration has been verified yet."]
    out = [] if serve_command(doc) else [
        "The engine was not started by servelab: there is no serve line; its configuration is unchanged."]
    if final.get("model"):  # a model change was kept: say what it replaced and what stayed the same
        out.append(f"Model: {final['model']}, served instead of {doc['engine'].get('model')} (the same requests: "
                   "the workload's tokenizer was kept).")
    env = final.get("env") or {}
    if env and not all(f"{k}=" in (final.get("serve_command") or "") for k in env):
        out.append("Environment: " + " ".join(f"{k}={v}" for k, v in sorted(env.items())) + ".")
    return out + [client_text(final.get("client") or {})]


def comparison_table(doc: dict) -> Table:
    """Baseline against the final configuration on every metric the steps carry."""
    base = (doc.get("baseline") or {}).get("result") or {}
    now = final_result(doc) or {"output_tok_s": doc["final"].get("output_tok_s")}
    rows = []
    for key, label, digits in RESULT_COLUMNS:
        b, f = base.get(key), now.get(key)
        ratio = f"{f / b:.2f}× ({pct(f / b)})" if b and f is not None else "-"
        rows.append([label, num(b, digits), num(f, digits), ratio])
    return Table(["metric", "baseline", "final", "final / baseline"], rows)


def operating_lines(doc: dict) -> list[str]:
    op = doc.get("operating_point")
    if not op and doc.get("operating_point_skipped"):
        return [f"Not measured: {doc['operating_point_skipped']} was asked (no load ladder on the final "
                "configuration)."]
    if not op:
        if doc["stopped_because"] is None:
            return ["Not measured yet: the load sweep on the final configuration comes after the last change."]
        return [f"Not measured: the run stopped ({doc['stopped_because']}) before the load sweep on the final "
                "configuration."]
    return [f"{LOAD_NAMES.get(op['over'], op['over'])} {op['load']:g}: {num(op['output_tok_s'])} output tok/s, "
            f"mean TTFT {num(op['mean_ttft_ms'], 0)} ms, mean TPOT {num(op['mean_tpot_ms'])} ms.",
            f"Why here: {op.get('why') or 'no reason recorded'}."]


def points_table(op: dict) -> Table:
    rows, mark = [], None
    for i, p in enumerate(sorted(op.get("points") or [], key=lambda p: p["load"])):
        at = p["load"] == op["load"]
        mark = i if at else mark
        rows.append([f"{p['load']:g}", *(num(p.get(k), d) for k, _, d in RESULT_COLUMNS),
                     "← operating point (knee)" if at else ""])
    return Table([LOAD_NAMES.get(op["over"], op["over"]), *(h for _, h, _ in RESULT_COLUMNS), "note"], rows,
                 text=("note",), mark=mark)
