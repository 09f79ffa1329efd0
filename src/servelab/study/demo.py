"""The demo is a study: ``demo.toml`` beside this file, run on the embedded engine
(vLLM's CPU build + SmolLM2-135M-Instruct, offline). It shows the whole loop —
a baseline, a scheduler cap, prefix caching on vs off, and the baseline against
itself — in about 7 minutes on 2 cores.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from servelab.study.file import Study, load_study

DEMO_FILE = Path(__file__).with_name("demo.toml")


def demo_study(out: Path | None = None, port: int | None = None, repeats: int | None = None) -> Study:
    """The packaged demo study, writing to ``out`` (default: a fresh results/demo-<time>)."""
    study = load_study(DEMO_FILE)
    out = out or Path("results") / time.strftime("demo-%Y%m%d-%H%M%S")
    changes = {"name": out.name, "results": out.parent}
    if port is not None:
        changes["port"] = port
    if repeats is not None:
        changes["repeats"] = repeats
    return dataclasses.replace(study, **changes)
