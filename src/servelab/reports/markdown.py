"""The report as Markdown: the same tables and methodology, no plots (see report.html)."""

from __future__ import annotations

from servelab.reports import verdict as v
from servelab.reports.table import WEIGHTS_ESTIMATE
from servelab.reports.table import render_markdown as tables_markdown


def render_markdown(report) -> str:
    out = [f"# {report.title}", "", f"Generated {report.generated} by servelab {report.version}."
           + (f" {report.description}" if report.description else ""), "",
           "Plots (memory, throughput, latency distributions, requests in flight) are in `report.html`.", "",
           "## Comparison", "", tables_markdown(report.tables, report.floor), "", "## Memory budget per engine", ""]
    out += _memory(report)
    if report.diagnoses:
        out += ["", "## Diagnosis (first repeat of each config)", ""]
        out += [f"- **{d['config']}** / {d['workload']}: {d['verdict']} — {d['summary']}" for d in report.diagnoses]
    out += ["", "## Sample prompts", ""] + _prompts(report)
    out += ["", "## Methodology and limits", "", f"- **hardware**: {report.hardware}"]
    out += [f"- **engine {name}**: {text}" for name, text in report.engines]
    out += [f"- **engine {name}** launched as: `{line}`" for name, line in report.launches]
    out += [f"- **workload {name}**: {text}" for name, text in report.workloads]
    out += [f"- **verdict rule**: {v.rule_text(report.floor)}", "", "What these numbers do not show:", ""]
    out += [f"- {item}" for item in report.limits]
    return "\n".join(out) + "\n"


def _memory(report) -> list[str]:
    rows = ["| engine | weights GiB | KV cache GiB | other GiB | total GiB | KV tokens | KV tokens predicted "
            "| max concurrency |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for m in report.memory:
        weights = _num(m["weights"], 3) + ("*" if m["estimated"] else "")
        rows.append(f"| {m['name']} | {weights} | {_num(m['KV cache'], 2)} | {_num(m['other'], 2)} | "
                    f"{_num(m['total'], 2)} | {_num(m['kv_tokens'], 0)} | {predicted_kv(m)} | "
                    f"{_num(m['max_concurrency'], 2)} |")
    if any(m["estimated"] for m in report.memory):
        rows += ["", f"\\* {WEIGHTS_ESTIMATE}."]
    return rows


def predicted_kv(m: dict) -> str:
    """servelab plan's KV tokens and its error, e.g. "46,592 (exact)"; "-" without a prediction."""
    if m.get("kv_tokens_predicted") is None:
        return "-"
    error = m.get("kv_tokens_error")
    label = "" if error is None else " (exact)" if error == 0 else f" ({error:+.1%})"
    return f"{m['kv_tokens_predicted']:,}{label}"


def _prompts(report) -> list[str]:
    if not report.prompts:
        return ["No prompt samples were saved with these runs."]
    out = []
    for workload, rows in report.prompts.items():
        out += [f"### workload {workload}", ""]
        for p in rows:
            fence = _fence(p["prompt"])
            out += [f"{p['prompt_len']} prompt tokens → {p['output_len']} output tokens:", "", fence, p["prompt"],
                    fence, ""]
    return out


def _fence(text: str) -> str:
    """A code fence longer than any run of backticks in ``text``, so the prompt cannot close it."""
    longest, run = 0, 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def _num(x, digits: int) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"
