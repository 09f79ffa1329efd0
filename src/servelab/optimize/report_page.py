"""The optimize note as one self-contained HTML page, and its one plot.

The page wears the study report's head and stylesheet (``reports/html.HEAD``) and follows its
rules: inline CSS and SVG, no script, nothing fetched, every string from optimize.json
through Jinja's autoescape — only the SVG matplotlib wrote is inserted as markup. The
plot is where a reader would rather look than read: throughput and mean TTFT against
the load on the final configuration, the operating point (the knee) marked.
"""

from __future__ import annotations

from markupsafe import Markup

from servelab.reports import plots
from servelab.reports.html import HEAD
from servelab.results.plots import has_matplotlib
from servelab.sweep.plots import SIMULATED, labelled_loads

TEMPLATE = HEAD + r"""
/* Commands wrap rather than widen the page: a serve line is pasted whole, not read across. */
pre.cmd { white-space: pre-wrap; overflow-wrap: anywhere; background: #f6f8fa; border: 1px solid #e3e3e3;
          padding: .6rem; font-size: .82rem; }
/* Words wrap between words; a flag or variable name (the change) anywhere, so a table fits a printed page. */
td.txt, th.txt { text-align: left; overflow-wrap: break-word; } td.any { overflow-wrap: anywhere; }
tr.mark td { background: #eef7ee; font-weight: 600; }
.sim { color: #b42318; font-weight: 700; }
</style>
</head>
<body>
{% macro table(t) %}<div class="wide"><table>
<thead><tr>{% for h in t.header %}<th{% if h in t.text %} class="txt"{% endif %}>{{ h }}</th>{% endfor %}</tr></thead>
<tbody>{% for row in t.rows %}{% set i = loop.index0 %}<tr{% if i == t.mark %} class="mark"{% endif %}>
{% for cell in row %}<td class="{{ cell_class(t, loop.index0, cell) }}">{{ cell }}</td>{% endfor %}</tr>
{% endfor %}</tbody></table></div>
{% if t.notes %}<ul class="notes">{% for x in t.notes %}<li>{{ x }}</li>{% endfor %}</ul>{% endif %}{% endmacro %}
<h1>{{ n.title }}</h1>
<p class="meta">{{ n.meta }}</p>
<nav><a href="#summary">summary</a><a href="#steps">steps</a><a href="#final">final configuration</a>
<a href="#operating">operating point</a><a href="#next">next</a><a href="#methodology">methodology and limits</a></nav>

<h2 id="summary">Summary</h2>
<ul>{% for line in n.summary %}<li>{{ line }}</li>{% endfor %}</ul>

<h2 id="steps">Steps</h2>
{{ table(n.steps) }}
{% for d in n.details %}
<h3>{{ d.heading }}{% if d.simulated %} <span class="sim">SIMULATED</span>{% endif %}</h3>
<p>{{ d.lines | join(" ") }}</p>
{% if d.evidence %}<ul class="notes">{% for e in d.evidence %}<li>evidence: {{ e }}</li>{% endfor %}</ul>{% endif %}
{% if d.runs %}<p class="notes">runs: {% for r in d.runs %}<code>{{ r }}</code>{% if not loop.last %}, {% endif %}
{% endfor %}</p>{% endif %}
{% endfor %}

<h2 id="final">Final configuration</h2>
{% if n.serve_command %}<pre class="cmd">{{ n.serve_command }}</pre>{% endif %}
{% for line in n.final %}<p>{{ line }}</p>{% endfor %}
{{ table(n.comparison) }}

<h2 id="operating">Operating point</h2>
{% for line in n.operating %}<p>{{ line }}</p>{% endfor %}
{% if n.figure %}<figure><figcaption>output tok/s (solid, left) and mean TTFT (dashed, right) against the load
on the final configuration; the circle marks the operating point</figcaption>{{ figure }}</figure>{% endif %}
{% if n.points %}{{ table(n.points) }}{% endif %}

<h2 id="next">Next: N replicas</h2>
{% if n.scale_command %}<p>Each replica at {{ n.scale_at }}, counted in one window:</p>
<pre class="cmd">{{ n.scale_command }}</pre>{% else %}<p>No scale command was recorded.</p>{% endif %}

<h2 id="methodology">Methodology and limits</h2>
<dl class="facts">{% for name, text in n.method %}<dt>{{ name }}</dt><dd>{{ text }}</dd>{% endfor %}</dl>
<h3>What these numbers do not show</h3>
<ul>{% for item in n.limits %}<li>{{ item }}</li>{% endfor %}</ul>
</body>
</html>
"""

# "(quality" first: a change faster beyond noise but not kept for its answers is not a green cell
_VERDICT_CLASS = (("(quality", "worse"), ("(better", "better"), ("(worse", "worse"), ("(within noise", "noise"))


def render_html(note) -> str:
    from jinja2 import Environment

    env = Environment(autoescape=True)
    return env.from_string(TEMPLATE).render(n=note, r=note, figure=Markup(note.figure), cell_class=_cell_class)


def _cell_class(table, column: int, cell: str) -> str:
    """Words left-aligned; a noise verdict coloured as compare's tables colour it."""
    if table.header[column] not in table.text:
        return ""
    anywhere = " any" if table.header[column] == "change" else ""
    return "txt" + anywhere + " " + next((cls for word, cls in _VERDICT_CLASS if word in cell), "")


def operating_figure(op: dict | None, simulated: bool) -> str:
    """Throughput and mean TTFT against the load, the operating point circled; "" with nothing to draw."""
    points = sorted((op or {}).get("points") or [], key=lambda p: p["load"])
    if not points or not has_matplotlib():
        return ""
    plt = plots.svg_pyplot()
    xs = [p["load"] for p in points]
    fig, ax = plt.subplots(figsize=(7.5, 3.2))
    ax.plot(xs, [p["output_tok_s"] for p in points], "o-", color=plots.PALETTE[0], label="output tok/s")
    right = ax.twinx()
    right.plot(xs, [p["mean_ttft_ms"] for p in points], "s--", color=plots.PALETTE[3], label="mean TTFT ms")
    name = {"rate": "request rate (req/s)"}.get(op["over"], op["over"])
    ax.plot([op["load"]], [op["output_tok_s"]], "o", ms=13, mfc="none", mec="#2ca02c", mew=2,
            label=f"operating point: {name} {op['load']:g}")
    ax.axvline(op["load"], color="#2ca02c", linestyle=":", linewidth=1.2)
    _load_axis(ax, xs, op["load"])
    ax.set(xlabel=name, ylabel="output tok/s", ylim=(0, None))
    right.set(ylabel="mean TTFT (ms)", ylim=(0, None))
    right.spines["right"].set_visible(True)
    handles = ax.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
    ax.legend(handles=handles, frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.12, 1.0))
    ax.grid(alpha=0.3)
    if simulated:
        fig.text(0.5, 1.0, SIMULATED, ha="center", va="bottom", color="#d62728", weight="bold")
    return plots._svg(fig)


def _load_axis(ax, loads: list[float], operating: float) -> None:
    """Loads in a ladder are geometric: a log axis, ticked where a label fits, when they span 4× or more."""
    if len(loads) < 2 or loads[0] <= 0 or loads[-1] / loads[0] < 4:
        return
    shown = labelled_loads(loads, [operating])
    ax.set_xscale("log")
    ax.minorticks_off()
    ax.set_xticks(shown, [f"{x:g}" for x in shown])
