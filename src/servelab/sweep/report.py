"""What tune shows and keeps: the ranking table (with each run's number as
evidence), the winner's serve command, ``tune.json`` and the ``tune.md`` section
a report can include."""

from __future__ import annotations

import math
import statistics

from servelab.sweep.ladder import LOADS
from servelab.search.rank import Ranked, lead_text, rule_text
from servelab.search.table import markdown as md_table
from servelab.search.table import num


def _unit(objective: str) -> str:
    return "out tok/s" if objective == "throughput" else "goodput req/s"


def _latency(outcome, r: Ranked, key: str) -> float | None:
    """Median over the repeats at the score's load."""
    values = [p.latency(key) for p, _ in outcome.trials[r.name].runs if r.score and p.load == r.score.load]
    values = [v for v in values if not math.isnan(v)]
    return statistics.median(values) if values else None


def ranking_table(outcome) -> str:
    plan = outcome.plan
    digits = 1 if plan.objective == "throughput" else 2
    header = ["rank", "config", "verdict", LOADS[plan.over][1], f"score ({_unit(plan.objective)})", "median",
              "spread", "runs", "p99 TTFT ms", "p99 E2EL ms", "note"]
    rows = []
    for i, r in enumerate(outcome.ranked, 1):
        s = r.score
        runs = ", ".join(num(v, digits) for v in s.values) if s else "-"
        rows.append([str(i), r.name, r.verdict, f"{s.load:g}" if s else "-", num(s.value if s else None, digits),
                     num(s.median if s else None, digits), num(s.spread if s else None, digits), runs,
                     num(_latency(outcome, r, "p99_ttft"), 0), num(_latency(outcome, r, "p99_e2el"), 0),
                     _short(r.config.note)])
    return md_table(header, rows, text=("config", "verdict", "runs", "note"))


def _short(text: str, width: int = 80) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def winner_lines(outcome) -> list[str]:
    w = outcome.winner
    if w is None:
        return ["winner: none — no config meets the SLO (see the ranking)"]
    s, name = w.score, LOADS[outcome.plan.over][1]
    head = (f"winner: {w.name} — score {s.value:.1f} {_unit(outcome.plan.objective)} "
            f"(median {s.median:.1f} − spread {s.spread:.1f}, {len(s.values)} runs) at {name} {s.load:g}")
    return [head, lead_text(outcome.ranked), "serve it with:", f"  {outcome.command}"]


def text(outcome) -> str:
    """What the command prints."""
    plan = outcome.plan
    lines = ["", ranking_table(outcome), "", f"rule: {rule_text(plan.objective, plan.slo or {})}",
             *winner_lines(outcome)]
    lines += [f"{t.candidate.name}: {t.status} — {t.note}" for t in outcome.trials.values()
              if t.status != "ran"]
    return "\n".join(lines)


def markdown(outcome) -> str:
    """``tune.md``: a section a report can include as is."""
    plan = outcome.plan
    knobs = "; ".join(f"`{k.name}` ∈ {{{', '.join(k.values)}}}" for k in plan.knobs)
    loads = ", ".join(f"{x:g}" for x in plan.loads)
    scope = (f"{len(outcome.trials)} configs, each once per load; the top {plan.top} repeated to "
             f"{plan.repeats} runs per load.")
    out = [f"## Tuning `{plan.name}`", "",
           f"Knobs: {knobs}. Load: {LOADS[plan.over][1]} {loads}. Workload: `{' '.join(plan.argv)}`.",
           scope, "", f"Rule: {rule_text(plan.objective, plan.slo or {})}.", "", ranking_table(outcome), ""]
    out += _winner_md(outcome) + _not_run_md(outcome) + _evidence_md(outcome)
    return "\n".join(out) + "\n"


def _winner_md(outcome) -> list[str]:
    w = outcome.winner
    if w is None:
        return ["**No config meets the SLO.**", ""]
    head, lead = winner_lines(outcome)[:2]
    return [f"**{head.removeprefix('winner: ')}**", "", f"{lead[:1].upper()}{lead[1:]}.", "", "```sh",
            outcome.command, "```", ""]


def _not_run_md(outcome) -> list[str]:
    out = []
    for t in outcome.trials.values():
        if t.status == "ran":
            continue
        out += [f"- `{t.candidate.name}`: **{t.status}** — {t.note}"]
        if t.log_tail:
            out += ["  ```", *(f"  {line}" for line in t.log_tail), "  ```"]
    return (["### Not measured", "", *out, ""]) if out else []


def _evidence_md(outcome) -> list[str]:
    out = ["### Evidence (one result per run)", ""]
    for t in outcome.trials.values():
        if t.runs:
            out.append(f"- `{t.candidate.name}`: " + ", ".join(f"`{folder}/result.json`" for _, folder in t.runs))
    return out + [""]


def summary(outcome) -> dict:
    """``tune.json``."""
    plan, w = outcome.plan, outcome.winner
    return {
        "name": plan.name, "objective": plan.objective, "slo_ms": plan.slo, "over": plan.over,
        "loads": list(plan.loads), "knobs": {k.name: list(k.values) for k in plan.knobs},
        "workload_argv": list(plan.argv), "top": plan.top, "repeats": plan.repeats,
        "rule": rule_text(plan.objective, plan.slo or {}),
        "ranking": [_ranked_dict(outcome, i, r) for i, r in enumerate(outcome.ranked, 1)],
        "winner": None if w is None else {"config": w.name, "command": outcome.command,
                                          "lead": lead_text(outcome.ranked)},
    }


def _ranked_dict(outcome, rank: int, r: Ranked) -> dict:
    t, s = outcome.trials[r.name], r.score
    return {"rank": rank, "config": r.name, "knobs": t.candidate.choice, "verdict": r.verdict,
            "status": t.status, "note": t.note, "log_tail": t.log_tail,
            "engine_args": list(t.candidate.spec.args),
            "score": None if s is None else {"load": s.load, "value": s.value, "median": s.median,
                                             "spread": s.spread, "runs": list(s.values)},
            "runs": [{"load": p.load, "output_throughput": p.throughput, "request_goodput": p.goodput,
                      "errors": p.errors, "folder": folder} for p, folder in t.runs]}
