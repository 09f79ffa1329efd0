"""Every real-engine test skips, with a reason, where its engine is absent.

Runs the suite's ``engine`` tests in a child pytest with ``hide_engines`` loaded,
which makes the machine look like one without the engines (and makes launching
an engine raise): each must be skipped, none may fail, error or pass.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


def run_engine_tests(scene: str) -> str:
    env = {**os.environ, "HIDE_ENGINES": scene,
           "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    argv = [sys.executable, "-m", "pytest", "-p", "hide_engines", "-m", "engine", "-rs", "-q",
            "-p", "no:cacheprovider", str(TESTS)]
    done = subprocess.run(argv, env=env, cwd=TESTS.parent, capture_output=True, text=True, timeout=300)
    return done.stdout + done.stderr


@pytest.mark.parametrize("scene", ["all", "vllm-gpu"])
def test_every_real_engine_test_skips_with_a_reason_where_its_engine_is_absent(scene):
    out = run_engine_tests(scene)
    summary = out.strip().splitlines()[-1]
    assert re.fullmatch(r"\d+ skipped, \d+ deselected in [\d.]+s", summary), out[-3000:]
    reasons = re.findall(r"^SKIPPED \[\d+\] \S+: (.*)$", out, re.MULTILINE)
    assert reasons and all("install" in r or "needs" in r for r in reasons), reasons
