"""``scale``'s HTML page: per-replica timelines with the common window shaded, the
efficiency table and what it means, and the methodology and limits — read from
``scale.json`` alone, written beside it as ``report.html`` (self-contained: inline CSS and
SVG, no script) and ``report.md`` (the same text and table, to paste).

    path = write_scale_report(Path("results/scale/scale.json"))   # the HTML's path
"""

from __future__ import annotations

import json
from pathlib import Path

from markupsafe import Markup

from servelab.reports import plots
from servelab.results.layout import REPORT_HTML, REPORT_MD
from servelab.results.plots import has_matplotlib
from servelab.scale.result import explain


LIMITS = [
    "The clients run on the same machine as the replicas; each replica's own result says whether its client "
    "may have limited it (client-bound).",
    "The window ends at the first replica's last send: a closed loop's last wave, still at full load, is cut.",
    "Requests/s in the window counts whole completions; tokens/s does not quantize.",
    "Replica 0 alone is measured with its neighbours started and idle: an idle engine that still spins "
    "lowers the single-replica rate, and the efficiency with it.",
]

TEMPLATE = r"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>scale {{ r.name }} — servelab</title>
<style>
body { font-family: system-ui, sans-serif; margin: 0 auto; max-width: 1100px; padding: 1rem 1.5rem 4rem; }
h2 { border-bottom: 1px solid #ddd; margin-top: 2rem; } .meta { color: #555; font-size: .9rem; }
svg.plot { width: 100%; max-width: 900px; height: auto; display: block; }
table { border-collapse: collapse; font-size: .85rem; } th { background: #f5f5f7; }
th, td { border-bottom: 1px solid #e3e3e3; padding: .25rem .6rem; text-align: right; }
th:first-child, td:first-child { text-align: left; }
</style></head><body>
<h1>Scaling: {{ r.replicas }} replicas ({{ r.name }})</h1>
{% if r.simulated %}<p><b>{{ r.simulated }}</b></p>{% endif %}
<p class="meta">{{ r.date }} · servelab {{ r.provenance.servelab_version }} · {{ r.provenance.host }}</p>
<h2>Efficiency</h2>
<p><b>{{ eff }}</b> — {{ r.verdict }}. Replica 0 alone: {{ "%.1f"|format(single.mean) }} output tok/s
(min {{ "%.1f"|format(single.min) }}, max {{ "%.1f"|format(single.max) }}, {{ r.single.repeats|length }} repeats),
in its own steady window.</p>
{% for line in explained %}<p>{{ line }}</p>{% endfor %}
<table><thead><tr><th>replica</th><th>engine</th><th>out tok/s</th><th>req/s</th><th>tokens in window</th>
<th>tokens cut</th><th>TTFT p50/p99 ms</th><th>ramp-up end t0+s</th><th>drain start t0+s</th><th>diagnosis</th></tr></thead>
<tbody>{% for x in r.together.replicas %}<tr><td>{{ x.replica }}</td><td>{{ r.engines[x.replica].base_url }}</td>
<td>{{ "%.1f"|format(x.output_tok_s) }}</td><td>{{ "%.3f"|format(x.req_s) }}</td><td>{{ x.in_window.tokens }}</td>
<td>{{ x.in_window.tokens_cut }}</td><td>{{ ttft(x) }}</td><td>{{ "%.2f"|format(x.ramp_end_s) }}</td>
<td>{{ "%.2f"|format(x.drain_start_s) }}</td><td>{{ x.diagnosis or "-" }}</td></tr>{% endfor %}
<tr><td>total</td><td></td><td>{{ "%.1f"|format(r.together.total.output_tok_s) }}</td>
<td>{{ "%.3f"|format(r.together.total.req_s) }}</td><td colspan="6"></td></tr></tbody></table>
<h2>Timelines</h2>
<p class="meta">Common window t0+{{ "%.2f"|format(w.start_s) }} s … t0+{{ "%.2f"|format(w.end_s) }} s
({{ "%.2f"|format(w.length_s) }} s, shaded); cut outside it: {{ w.tokens_cut }} tokens, {{ w.requests_cut }} requests.</p>
{{ figure }}
<h2>Methodology and limits</h2>
<ul><li>{{ r.window_rule }}</li><li>{{ r.efficiency_rule }}</li><li>Noise: {{ r.noise_rule }}, replica 0's
alone repeats against the replicas' in-window rates.</li></ul>
<ul>{% for item in limits %}<li>{{ item }}</li>{% endfor %}</ul>
</body></html>
"""


def write_scale_report(scale_json: Path) -> Path:
    from jinja2 import Environment

    result = json.loads(Path(scale_json).read_text(encoding="utf-8"))
    eff = result["efficiency"]
    page = Environment(autoescape=True).from_string(TEMPLATE).render(
        r=result, w=result["together"]["window"], single=result["single"]["output_tok_s"], limits=LIMITS,
        eff="-" if eff is None else f"{eff:.1%}", ttft=_ttft, figure=_figure(result), explained=explain(result))
    path = Path(scale_json).with_name(REPORT_HTML)
    path.write_text(page, encoding="utf-8")
    path.with_name(REPORT_MD).write_text(markdown(result), encoding="utf-8")
    return path


def markdown(result: dict) -> str:
    """The report as Markdown: efficiency and what it means, the table, the window, the method."""
    w, single = result["together"]["window"], result["single"]["output_tok_s"]
    rows = ["| replica | out tok/s | req/s | TTFT p50/p99 ms | ramp-up end t0+s | drain start t0+s | diagnosis |",
            "|---|---:|---:|---:|---:|---:|---|"]
    for x in result["together"]["replicas"]:
        rows.append(f"| {x['replica']} | {x['output_tok_s']:.1f} | {x['req_s']:.3f} | {_ttft(x)} | "
                    f"{x['ramp_end_s']:.2f} | {x['drain_start_s']:.2f} | {x['diagnosis'] or '-'} |")
    total = result["together"]["total"]
    rows.append(f"| total | {total['output_tok_s']:.1f} | {total['req_s']:.3f} | | | | |")
    head = [f"# Scaling: {result['replicas']} replicas ({result['name']})", ""]
    head += [f"**{result['simulated']}**", ""] if result.get("simulated") else []
    return "\n".join([
        *head, "## Efficiency", "", *[f"- {line}" for line in explain(result)],
        f"- replica 0 alone: {single['mean']:.1f} output tok/s (min {single['min']:.1f}, max {single['max']:.1f}, "
        f"{len(result['single']['repeats'])} repeats), in its own steady window", "", *rows, "",
        f"Common window t0+{w['start_s']:.2f} s … t0+{w['end_s']:.2f} s ({w['length_s']:.2f} s); cut outside it: "
        f"{w['tokens_cut']} tokens, {w['requests_cut']} requests.", "", "## Methodology and limits", "",
        f"- {result['window_rule']}", f"- {result['efficiency_rule']}", f"- Noise: {result['noise_rule']}",
        *[f"- {item}" for item in LIMITS], ""])


def _ttft(replica: dict) -> str:
    s = replica["latency_ms"]["ttft"]
    return "-" if s is None else f"{s['p50']:.0f}/{s['p99']:.0f}"


def _figure(result: dict) -> Markup:
    if not has_matplotlib():
        return Markup('<p class="meta">no plot (matplotlib is not installed).</p>')
    return Markup(timelines(result["together"]["window"]))


def timelines(window: dict) -> str:
    """A panel per replica: output tok/s over time, the common window shaded."""
    plt = plots.svg_pyplot()
    series, bin_s = window["timeline"]["output_tok_s"], window["timeline"]["bin_s"]
    fig, axes = plt.subplots(len(series), 1, figsize=(7.5, 1.3 * len(series) + 0.6), sharex=True, squeeze=False)
    for i, (ax, ys) in enumerate(zip(axes[:, 0], series)):
        xs = [k * bin_s for k in range(len(ys))]
        ax.step(xs, ys, where="post", color=plots.PALETTE[i % len(plots.PALETTE)], linewidth=1.3)
        ax.axvspan(window["start_s"], window["end_s"], color="#999999", alpha=0.2, linewidth=0)
        ax.set_ylabel(f"replica {i}\ntok/s", rotation=0, ha="right", va="center")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel(f"seconds from the shared start instant (bins of {bin_s:g} s)")
    return plots._svg(fig)
