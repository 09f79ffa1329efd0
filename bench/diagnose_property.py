"""The diagnosis property at scale: thousands of timelines from known regimes (scheduler
cap, token budget, KV capacity, client cap, client cap equal to max_num_seqs, no limit, and a
budget-then-cap mixture, each with a ramp and a long tail), each checked as
``tests/diagnose/test_verdict_properties.py`` checks its 50: the first verdict names the
regime's limit and quotes its exact share.

    PYTHONPATH=src python bench/diagnose_property.py [CASES] [SEED]

Prints, per regime: cases, failures, the limit's share of the run as drawn, how many
were named as partial (PARTIAL ≤ share < PINNED) or whole, and the time per diagnosis.
Target: 0 failures. The first failure of each regime is printed with its case.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "diagnose"))  # the regime builder

from diag_regimes import REGIMES, Case, check  # noqa: E402

from servelab.diagnose.rules import PARTIAL, PINNED  # noqa: E402


def draw(rng: np.random.Generator) -> Case:
    """The test's strategy, wider: runs up to ~2,000 samples, tails up to 6× the bound phase, caps up to 1,024."""
    regime = str(rng.choice(REGIMES))
    lead, bound = int(rng.integers(0, 40)), int(rng.integers(1, 200))
    tail = 10 + int(bound * rng.uniform(0, 6))
    extra = int(rng.integers(0, 200)) if regime == "mix" else 0
    if regime == "none":
        bound = min(bound, int((lead + tail) * PARTIAL / (1 - PARTIAL)))
    return Case(regime, lead, bound, tail, int(rng.integers(2, 1025)), extra, bool(rng.integers(0, 2)))


def main(n: int, seed: int) -> int:
    rng = np.random.default_rng(seed)
    stats = defaultdict(lambda: {"cases": 0, "failed": 0, "shares": [], "partial": 0, "whole": 0, "seconds": 0.0})
    for _ in range(n):
        case = draw(rng)
        s = stats[case.regime]
        start = time.perf_counter()
        try:
            check(case)
        except AssertionError as exc:
            if not s["failed"]:
                print(f"FAIL {case}: {str(exc)[:300]}")
            s["failed"] += 1
        s["seconds"] += time.perf_counter() - start
        s["cases"] += 1
        drawn = max(case.bound, case.extra) / case.n
        s["shares"].append(drawn)
        named = case.expected()[0] != "no-limit-found"
        s["partial"] += named and drawn < PINNED
        s["whole"] += named and drawn >= PINNED
    print(f"{n} cases, seed {seed}")
    print(f"{'regime':<10} {'cases':>6} {'failed':>6} {'share min/median/max':>22} {'partial':>7} {'whole':>6} "
          f"{'ms/case':>8}")
    for regime in REGIMES:
        s = stats[regime]
        if s["cases"]:
            q = np.quantile(s["shares"], [0, 0.5, 1])
            print(f"{regime:<10} {s['cases']:>6} {s['failed']:>6} {q[0]:>10.3f}/{q[1]:.3f}/{q[2]:.3f} "
                  f"{s['partial']:>7} {s['whole']:>6} {1e3 * s['seconds'] / s['cases']:>8.1f}")
    return 1 if any(s["failed"] for s in stats.values()) else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000, int(sys.argv[2]) if len(sys.argv) > 2 else 1))
