"""The expected error of each predicted number, as the corpus measured it (data/bands.json).

tools/plan_accuracy.py replays every corpus row through the planner and writes, per metric, the
median / p90 / worst absolute error — on the held-out rows where there are at least three, else on
all rows (and then it says so). ``servelab plan`` and the simulated engine print that band beside
the number, so a user reads "24.8 GiB (±3.6 %)" and knows what ±3.6 % rests on. A setup no fit
row calibrates (``speed_model.SETUPS``: TP over 2 and eager mode, which the step model has no term
for, and an MoE, whose term comes from kernel benchmarks) has its own band ("METRIC@moe"), from
the corpus rows of that setup, none of them fitted, with the signed median: "+0.6 % median,
predicted high".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

BANDS = Path(__file__).parent / "data" / "bands.json"
MIN_HELD_OUT = 3
# A speed metric's band over the published runs at concurrency 1 alone, and over those under load
# (a key is the metric's name and one of these, e.g. "mean_tpot_ms@concurrency-1").
ALONE, UNDER_LOAD = "@concurrency-1", "@under-load"


@dataclass(frozen=True, slots=True)
class Band:
    metric: str
    median: float
    p90: float
    worst: float
    rows: int
    basis: str  # "held-out", "all rows", or "not fitted" (a setup's rows, none of them fitted)
    bias: float | None = None  # the signed median error (a setup's band: which way the model misses)

    def text(self) -> str:
        plural = "s" if self.rows != 1 else ""
        rows = {"held-out": f"{self.rows} held-out row{plural}",
                "not fitted": f"{self.rows} such row{plural}, none fitted"}.get(
            self.basis, f"{self.rows} row{plural}, fit and held-out")
        if self.bias is not None:
            way = "high" if self.bias > 0 else "low" if self.bias < 0 else "neither high nor low"
            return f"{self.bias:+.1%} median, predicted {way}; ±{self.p90:.1%} p90 on {rows}"
        return f"±{self.median:.1%} median, ±{self.p90:.1%} p90 on {rows}"


@lru_cache(maxsize=1)
def load_bands() -> dict[str, Band]:
    try:
        data = json.loads(BANDS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {name: Band(name, **values) for name, values in data.items()}


def band(metric: str) -> Band | None:
    return load_bands().get(metric)


def band_note(metric: str, setup: str | None = None) -> str:
    """" (±3.6 % median, ±5.1 % p90 on 4 held-out rows)", or "" where the corpus has no band. For a
    ``setup`` of ``speed_model.SETUPS``, its own band where the corpus has rows of it."""
    found = (band(metric.split("@")[0] + setup) if setup else None) or band(metric)
    return f" ({found.text()})" if found else ""
