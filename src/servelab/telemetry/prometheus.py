"""Prometheus text exposition format (0.0.4), parsed into plain values.

The parsing is ``prometheus_client``'s (maintained by the format's authors, and
installed with vLLM, which exposes its metrics through it): escapes in label
values, ``NaN``/``±Inf``, timestamps, HELP/TYPE lines. What this module adds is
the shape servelab reads — samples under the name the server *exposed* — and a
filter, because a scrape needs a few dozen of an engine's ~600 lines and the
library's parser is pure Python: filtering lines first makes a scrape ~7× cheaper.

Two things prometheus_client does that the exposed names show: a counter whose
TYPE line lacks ``_total`` has its samples named with ``_total`` (as the
client library exposes counters); a ``_created`` sample is its own series, never
the counter's value.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from servelab.errors import ServerError

Labels = dict[str, str]


@dataclass(slots=True)
class Exposition:
    """samples: exposed name (``_total``, ``_bucket`` … included) -> [(labels, value)];
    types: exposed family name -> ``counter`` | ``gauge`` | ``histogram`` | …
    (a counter under its ``_total`` name; families with no TYPE line are left out)."""

    samples: dict[str, list[tuple[Labels, float]]] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)

    def get(self, name: str) -> list[tuple[Labels, float]]:
        return self.samples.get(name, [])


def parse(text: str, keep: frozenset[str] | None = None) -> Exposition:
    """All samples, or only those whose name (as written on its line) is in
    ``keep``; lines left out are never parsed. A line that does not parse raises
    ``ServerError`` naming it: a page we cannot read is the server's fault, and
    its caller records one line, not a traceback."""
    if keep is not None:
        text = _only(text, keep)
    out = Exposition()
    try:
        for family in text_string_to_metric_families(text):
            _add(family, out)
    except ValueError:
        raise ServerError(f"malformed /metrics line {_first_bad_line(text)}") from None
    return out


def _only(text: str, keep: frozenset[str]) -> str:
    # TYPE lines stay, so counters are still named as the parser names them.
    lines = [line for line in text.splitlines()
             if line.startswith("# TYPE ") or _line_name(line) in keep]
    return "\n".join(lines)


def _line_name(line: str) -> str:
    head = line.split("{", 1)[0].split(None, 1)
    return head[0] if head else ""


def _add(family, out: Exposition) -> None:
    if family.type != "unknown":
        out.types[family.name + "_total" if family.type == "counter" else family.name] = family.type
    for s in family.samples:
        out.samples.setdefault(s.name, []).append((s.labels, float(s.value)))


def _first_bad_line(text: str) -> str:
    """The line that broke the parse (the library's message does not say); only on failure."""
    for line in text.splitlines():
        try:
            list(text_string_to_metric_families(line))
        except ValueError:
            return repr(line if len(line) <= 80 else line[:77] + "...")
    return "not Prometheus text"
