"""``optimize.json``: the record of an optimization, written after every step.

Its shape is the contract with the report (``optimize/report.py``) and with scripts and
agents (``--json``): docs/optimize.md. Written atomically after every step, so Ctrl-C
or a crash leaves a valid file; a rerun reads it back to replay the recorded decisions.
"""

from __future__ import annotations

import json
from pathlib import Path

from servelab.metrics.noise import NOISE_FLOOR, TAIL_FACTOR
from servelab.results.layout import OPTIMIZE_FILE, write_json_atomic
from servelab.results.store import finite  # NaN and ±inf as null: JSON has neither

SCHEMA = "servelab.optimize/1"
FILE = OPTIMIZE_FILE  # the name is results/layout.py's


def noise_rule(repeats: int, objective: str) -> dict:
    """compare's rule, the floor it uses for this objective, and how the floor shrinks with repeats."""
    floor = NOISE_FLOOR * (TAIL_FACTOR if objective == "latency" else 1.0)
    return {"rule": (f"kept only when better beyond noise, by compare's rule (metrics/noise.py): both sides have "
                     f"≥ 2 repeats, their min–max ranges do not overlap, and the means differ by more than "
                     f"{floor:.0%} of the current best's mean. The floor is fixed; more repeats shrink the "
                     f"chance that noise alone separates the ranges (with 2 a side, non-overlap alone calls noise "
                     f"a difference about 1 time in 3; with 4 a side, about 1 in 35), so --repeats 4 lets a real "
                     f"gain near the floor be kept with less risk of keeping noise."),
            "floor": floor, "repeats": repeats}


def read(folder: Path) -> dict | None:
    try:
        data = json.loads((folder / FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("schema") == SCHEMA else None


def write(folder: Path, record: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / FILE
    write_json_atomic(path, finite(record))
    return path


def dumps(record: dict) -> str:
    """The stable ``--json`` form: the file's object, keys sorted."""
    return json.dumps(finite(record), indent=2, sort_keys=True, allow_nan=False)
