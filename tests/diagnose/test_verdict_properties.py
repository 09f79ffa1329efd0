"""Property: on timelines from known regimes, the first verdict names the regime's limit
and quotes the share of the run it held — exactly, not only some words that are absent.

Bounded for CI (50 examples, ~10 s); ``bench/diagnose_property.py`` runs thousands.
"""

from __future__ import annotations

from diag_regimes import REGIMES, Case, check
from hypothesis import given, settings
from hypothesis import strategies as st

from servelab.diagnose.rules import PARTIAL


@st.composite
def cases(draw) -> Case:
    regime = draw(st.sampled_from(REGIMES))
    lead, bound, tail = draw(st.integers(0, 12)), draw(st.integers(1, 40)), draw(st.integers(10, 120))
    extra = draw(st.integers(0, 40)) if regime == "mix" else 0
    if regime == "none":  # a burst being admitted: under PARTIAL of the run
        bound = min(bound, int((lead + tail) * PARTIAL / (1 - PARTIAL)))
    cap = draw(st.integers(2, 256))
    return Case(regime, lead, bound, tail, cap, extra, draw(st.booleans()))


@settings(max_examples=50, deadline=None, derandomize=True)
@given(cases())
def test_the_first_verdict_names_the_regime_and_its_share(case):
    check(case)
