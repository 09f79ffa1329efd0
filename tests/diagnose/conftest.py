"""The real-engine tests here run with the other engine tests: a fast-loop run
that leaves tests/engines out (``--ignore=tests/engines``) leaves them out too,
so it never starts a vLLM process. ``pytest -m engine tests/diagnose`` runs them."""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_collection_modifyitems(config, items):
    ignored = config.getoption("ignore") or []
    if not any(Path(p).name == "engines" for p in ignored):
        return
    skip = pytest.mark.skip(reason="real engine: the run ignores tests/engines (fast loop)")
    here = Path(__file__).parent
    for item in items:
        if item.get_closest_marker("engine") and Path(str(item.fspath)).parent == here:
            item.add_marker(skip)
