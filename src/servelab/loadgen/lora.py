"""``--lora-modules``: which adapter (the ``model`` field) each request names.

vLLM's rules: ``round-robin`` gives request i module i mod k; ``random`` draws one
per request, uniformly. servelab draws from its own generator seeded by ``--seed``
(vLLM uses Python's ``random`` after the dataset has consumed it, so its draw cannot
be reproduced outside its own process); the same seed gives the same assignment.

Beyond vLLM's two (the popularity shapes SGLang's client offers, in our own words, as
``--lora-assignment``'s help defines them): ``uniform`` (equal counts, shuffled),
``identical`` (one adapter), ``distinct`` (one adapter per request) and ``zipf:ALPHA``
(rank r drawn with probability ∝ r^-ALPHA over the k adapters named, in their order).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from servelab.errors import InputError
from servelab.spec_checks import lora_rule
from servelab.records import SampleRequest

_STREAM = 0x10A  # keeps these draws apart from the arrivals' generator of the same seed


def request_models(samples: list[SampleRequest], modules: tuple[str, ...], assignment: str,
                   seed: int) -> dict[str, str]:
    """request id -> adapter name, in request order; empty without modules."""
    if not modules:
        return {}
    rule, alpha = lora_rule(assignment)
    n, k = len(samples), len(modules)
    rng = np.random.default_rng([seed, _STREAM])
    if rule == "round-robin":
        picks = [i % k for i in range(n)]
    elif rule == "uniform":  # equal counts (within one), in a seeded order
        picks = list(rng.permutation([i % k for i in range(n)]))
    elif rule == "identical":
        picks = [0] * n
    elif rule == "distinct":
        if n > k:  # check_spec refused more prompts than adapters; sessions make a request per call
            raise InputError(f"--lora-assignment distinct gives each request its own adapter: this run's {n} "
                             f"requests (an agentic session's calls each count) need at least {n} names in "
                             f"--lora-modules (given {k})")
        picks = list(range(n))
    elif rule == "zipf":
        weights = np.arange(1, k + 1, dtype=float) ** -alpha
        picks = list(rng.choice(k, size=n, p=weights / weights.sum()))
    else:
        picks = list(rng.integers(0, k, size=n))
    return {s.request_id: modules[j] for s, j in zip(samples, picks)}


def counts(models: dict[str, str], modules: tuple[str, ...]) -> dict[str, int]:
    """Each adapter's number of requests, in the order named (an adapter no request drew: 0)."""
    drawn = Counter(models.values())
    return {m: drawn[m] for m in modules}
