"""Properties over timelines from known regimes: the first verdict names the regime's limit
and quotes the share of the run it held — exactly, not only some words that are absent; and
on full CPU-engine cores, a batch pinned at a cap is never ``cpu-compute-bound``.

Bounded for CI (50 examples, ~10 s); ``bench/diagnose_property.py`` runs thousands.
"""

from __future__ import annotations

from diag_regimes import REGIMES, Case, check
from diag_timelines import run
from hypothesis import given, settings
from hypothesis import strategies as st

from servelab.diagnose.evidence import Host
from servelab.diagnose.rules import PARTIAL

CPU_FULL = Host(cpus=2, busy=0.99, others=0.0, cpu_engine=True)  # a CPU engine's two cores, full


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


@st.composite
def busy_cases(draw) -> Case:
    """As ``cases``, with ``bound`` free to be 0 (nothing pins the batch)."""
    regime = draw(st.sampled_from(REGIMES))
    lead, bound, tail = draw(st.integers(0, 12)), draw(st.integers(0, 40)), draw(st.integers(10, 120))
    extra = draw(st.integers(0, 40)) if regime == "mix" else 0
    return Case(regime, lead, bound, tail, draw(st.integers(2, 256)), extra, draw(st.booleans()))


@settings(max_examples=50, deadline=None, derandomize=True)
@given(busy_cases())
def test_a_batch_pinned_at_a_cap_is_never_cpu_compute_bound(case):
    """Every regime's bound phase pins the batch (running at a cap, or requests waiting for a slot
    at the engine or the client); the lead and tail run below every cap with nothing waiting. On
    full cores: pinned for ≥ PARTIAL of the run, never cpu-compute-bound; never pinned, it is."""
    ids = [v.id for v in run(case.timeline(), **case.facts(), host=CPU_FULL).verdicts]
    held = (case.bound + case.extra) / case.n
    if held >= PARTIAL:
        assert "cpu-compute-bound" not in ids, (case, ids)
    if held == 0:
        assert ids[0] == "cpu-compute-bound", (case, ids)
