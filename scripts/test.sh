#!/usr/bin/env bash
# The README's test command (and CI's, through .ci/run), in three steps; it stops at the first
# that fails:
#   1. the default tier: every test but the timing ones (the real-engine tests included);
#   2. the timing tier, on its own and serially: tests whose truth is a wall-clock bound or a
#      real-time window (@pytest.mark.timing), so a busy machine is told apart from a regression;
#   3. the planner corpus check: the committed accuracy table and bands regenerate unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."

.venv/bin/python -m pytest -q -m "not timing"
.venv/bin/python -m pytest -q -m timing
.venv/bin/python tools/plan_accuracy.py --check
