"""When a state held: its share of the run and the times it held, for a verdict to quote.

A mean over a long-tailed run hides a limit that bound only while the queue was long
(32 running at a cap of 32 for the first 40 % of the run, then a tail of a few): the
mean says 14.5 running and nothing pinned. So a rule marks each loaded sample (the
cap bound, the queue stood) and ``spell`` turns the marks into

* the share of samples marked — the sampler ticks evenly, so a share of samples is a
  share of the loaded run's time;
* the spans of marked samples, in seconds from t0, each running to the next tick.

A verdict then says "for 41% of the run, 0–38 s", and a test can check that share.
"""

from __future__ import annotations

from dataclasses import dataclass

SHOWN = 3  # spans written out in a verdict; the rest are counted ("and 2 more")


@dataclass(frozen=True, slots=True)
class Spell:
    share: float  # of the loaded samples, 0–1
    spans: tuple[tuple[float, float], ...] = ()  # (from, to) seconds from t0

    def text(self) -> str:
        """'41% of the run, 0–38 s' (or '… 0–6.2 s and 12–14 s')."""
        digits = 0 if self.spans and self.spans[-1][1] >= 10 else 1  # whole seconds from 10 s on
        shown = [f"{_s(a, digits)}–{_s(b, digits)} s" for a, b in self.spans[:SHOWN]]
        more = len(self.spans) - SHOWN
        if more > 0:
            shown.append(f"{more} more")
        when = ", ".join(shown[:-1]) + " and " + shown[-1] if len(shown) > 1 else "".join(shown)
        return f"{self.share:.0%} of the run" + (f", {when}" if when else "")

    def to_dict(self) -> dict:
        return {"share": round(self.share, 3), "spans_s": [[round(a, 2), round(b, 2)] for a, b in self.spans]}


NEVER = Spell(0.0)


def spell(times_s, marks, tick_s: float) -> Spell:
    """Share and spans of ``marks`` (one bool per sample at ``times_s``). A span runs from
    its first marked sample to one tick past its last; spans one unmarked tick apart are
    one span (a gauge read between two admissions), so the text stays short."""
    times_s, marks = list(times_s), list(marks)
    if not marks or not any(marks):
        return NEVER
    spans: list[list[float]] = []
    for t, marked in zip(times_s, marks):
        if not marked:
            continue
        if spans and t - spans[-1][1] <= tick_s * 1.01:  # 1 % slack: ticks jitter by a little
            spans[-1][1] = t + tick_s
        else:
            spans.append([t, t + tick_s])
    return Spell(sum(marks) / len(marks), tuple((a, b) for a, b in spans))


def _s(x: float, digits: int) -> str:
    """Seconds as a verdict writes them, without a trailing ".0" ("0–5 s", "0.2–6.2 s")."""
    text = f"{x:.{digits}f}"
    return text[:-2] if text.endswith(".0") else text
