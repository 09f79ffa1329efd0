"""The report as one self-contained HTML file: inline CSS, inline SVG plots, no
script, nothing fetched. Every string from the results (config names, prompts,
diagnoses) goes through Jinja's autoescape; only the SVG that matplotlib wrote
is inserted as markup.
"""

from __future__ import annotations

from markupsafe import Markup

TEMPLATE = r"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<title>{{ r.title }} — servelab report</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1100px;
       padding: 1rem 1.5rem 4rem; color: #1d1d1f; background: #ffffff; line-height: 1.45; }
h1 { margin-bottom: .2rem; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2rem; margin-top: 2.2rem; }
.meta { color: #555; font-size: .9rem; }
figure { margin: 1rem 0 1.6rem; } figcaption { color: #444; font-size: .9rem; margin-bottom: .3rem; }
svg.plot { width: 100%; max-width: 900px; height: auto; display: block; }
table { border-collapse: collapse; font-size: .85rem; margin: .6rem 0; }
th, td { border-bottom: 1px solid #e3e3e3; padding: .25rem .5rem; text-align: right; }
th { overflow-wrap: anywhere; vertical-align: bottom; }
th:first-child, td:first-child { text-align: left; }
th { background: #f5f5f7; }
td.better { color: #1a7f37; font-weight: 600; } td.worse { color: #b42318; font-weight: 600; }
td.noise { color: #666; }
.notes { font-size: .85rem; color: #444; } .warn { color: #9a6700; }
pre.prompt { white-space: pre-wrap; word-break: break-word; background: #f6f8fa; border: 1px solid #e3e3e3;
             padding: .6rem; font-size: .8rem; max-height: 14rem; overflow: auto; }
dl.facts dt { font-weight: 600; margin-top: .5rem; } dl.facts dd { margin-left: 1rem; font-size: .9rem; }
nav a { margin-right: 1rem; }
div.wide { overflow-x: auto; }
/* Three configs or more must fit the page, on screen and on paper (a scroll bar is lost when printed):
   cells wrap at their spaces ("0.46× −54.0%" / "worse"), headers anywhere. */
@media print { body { max-width: none; padding: 0; } div.wide { overflow: visible; }
               table { font-size: 7.5pt; } th, td { padding: .1rem .3rem; } }
table.text td, table.text th { text-align: left; white-space: normal; }
</style>
</head>
<body>
<h1>{{ r.title }}</h1>
<p class="meta">generated {{ r.generated }} by servelab {{ r.version }}{% if r.description %} · {{ r.description }}{% endif %}</p>
<nav><a href="#comparison">comparison</a><a href="#memory">memory</a><a href="#throughput">throughput</a>
<a href="#latency">latency</a><a href="#timeline">timelines</a>{% if r.diagnoses %}<a href="#diagnosis">diagnosis</a>{% endif %}
<a href="#prompts">prompts</a><a href="#methodology">methodology and limits</a></nav>
{% if r.plot_note %}<p class="warn">{{ r.plot_note }}</p>{% endif %}

<h2 id="comparison">Comparison</h2>
{% for table, head, rows in r.grids() %}
<h3>{% if table.workload %}workload {{ table.workload }}{% else %}all runs{% endif %}</h3>
<p class="meta">load: {{ table.load }}</p>
<div class="wide"><table>
<thead><tr>{% for h in head %}<th>{{ h }}</th>{% endfor %}</tr></thead>
<tbody>
{% for row in rows %}<tr>{% for cell in row %}<td class="{{ cell_class(cell) }}">{{ cell }}</td>{% endfor %}</tr>
{% endfor %}</tbody>
</table></div>
<ul class="notes">{% for note in footer(table) %}<li{% if note.startswith('⚠') %} class="warn"{% endif %}>{{ note }}</li>{% endfor %}</ul>
{% endfor %}

<h2 id="memory">Memory budget per engine</h2>
{{ figures("memory") }}
<table>
<thead><tr><th>engine</th><th>weights GiB</th><th>KV cache GiB</th><th>other GiB</th><th>total GiB (source)</th>
<th>KV cache tokens</th><th>KV tokens predicted (servelab plan)</th><th>max concurrency</th></tr></thead>
<tbody>{% for m in r.memory %}<tr><td>{{ m.name }}</td><td>{{ num(m.weights, 3) }}{% if m.estimated %}*{% endif %}</td>
<td>{{ num(m["KV cache"], 2) }}</td><td>{{ num(m.other, 2) }}</td><td>{{ num(m.total, 2) }} ({{ m.total_source }})</td>
<td>{{ num(m.kv_tokens, 0) }}</td><td>{{ predicted_kv(m) }}</td><td>{% if m.max_concurrency %}{{ num(m.max_concurrency, 2) }}× at {{ num(m.max_concurrency_tokens, 0) }} tokens{% else %}-{% endif %}</td></tr>
{% endfor %}</tbody></table>
{% if r.memory | selectattr("estimated") | list %}<p class="notes">* {{ weights_estimate }}.</p>{% endif %}

<h2 id="throughput">Throughput</h2>
{{ figures("throughput") }}
<h2 id="latency">Latency distributions</h2>
{{ figures("latency") }}
<h2 id="timeline">Requests in flight, KV cache, tokens/s</h2>
{{ figures("timeline") }}

{% if r.diagnoses %}
<h2 id="diagnosis">Diagnosis (first repeat of each config)</h2>
<table class="text"><thead><tr><th>config</th><th>workload</th><th>verdict</th><th>confidence</th><th>summary</th></tr></thead>
<tbody>{% for d in r.diagnoses %}<tr><td>{{ d.config }}</td><td>{{ d.workload }}</td><td>{{ d.verdict }}</td>
<td>{{ num(d.confidence, 2) }}</td><td>{{ d.summary }}{% if d.next %} — next: {{ d.next }}{% endif %}</td></tr>
{% endfor %}</tbody></table>
{% endif %}

<h2 id="prompts">Sample prompts</h2>
{% for workload, rows in r.prompts.items() %}<h3>workload {{ workload }}</h3>
{% for p in rows %}<p class="meta">{{ p.prompt_len }} prompt tokens → {{ p.output_len if p.output_len is not none else "server decides" }} output tokens</p>
<pre class="prompt">{{ p.prompt }}</pre>
{% endfor %}{% else %}<p class="meta">no prompt samples were saved with these runs.</p>{% endfor %}

<h2 id="methodology">Methodology and limits</h2>
<dl class="facts">
<dt>hardware</dt><dd>{{ r.hardware }}</dd>
{% for name, text in r.engines %}<dt>engine {{ name }}</dt><dd>{{ text }}</dd>{% endfor %}
{% for name, line in r.launches %}<dt>engine {{ name }}: launched as</dt><dd><code>{{ line }}</code></dd>{% endfor %}
{% for name, text in r.workloads %}<dt>workload {{ name }}</dt><dd>{{ text }}</dd>{% endfor %}
<dt>verdict rule</dt><dd>{{ rule }}</dd>
</dl>
<h3>What these numbers do not show</h3>
<ul>{% for item in r.limits %}<li>{{ item }}</li>{% endfor %}</ul>
</body>
</html>
"""


# The page up to the end of its stylesheet (doctype, policy, title from ``r.title``, CSS), for pages
# that should look like this one and add rules of their own (optimize's note): cut from the template
# above, so there is one copy to change.
HEAD = TEMPLATE[:TEMPLATE.index("</style>")]


def render_html(report) -> str:
    from jinja2 import Environment

    from servelab.reports import verdict as v
    from servelab.reports.markdown import predicted_kv
    from servelab.reports.table import WEIGHTS_ESTIMATE, footer

    env = Environment(autoescape=True, trim_blocks=False)
    template = env.from_string(TEMPLATE)
    return template.render(r=report, rule=v.rule_text(report.floor), num=_num, cell_class=_cell_class,
                           predicted_kv=predicted_kv, weights_estimate=WEIGHTS_ESTIMATE, footer=lambda t: footer(t, report.floor), figures=lambda s: _figures(report, s))


def _figures(report, section: str) -> Markup:
    """The SVG of one section, each in a <figure> with an escaped caption."""
    from markupsafe import escape

    parts = [f"<figure><figcaption>{escape(caption)}</figcaption>{svg}</figure>"
             for caption, svg in report.figures.get(section, [])]
    return Markup("\n".join(parts) if parts else '<p class="meta">no plot.</p>')


def _num(x, digits: int) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def _cell_class(cell: str) -> str:
    for word, cls in (("better", "better"), ("worse", "worse"), ("within noise", "noise"),
                      ("diverges beyond it", "worse"), ("worse than the reference", "worse"),
                      ("keeps the reference's score", "better"), ("same within its own variation", "noise")):
        if cell.endswith(word):
            return cls
    return ""
