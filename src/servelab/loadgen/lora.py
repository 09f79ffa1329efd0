"""``--lora-modules``: which adapter (the ``model`` field) each request names.

vLLM's rules: ``round-robin`` gives request i module i mod k; ``random`` draws one
per request, uniformly. servelab draws from its own generator seeded by ``--seed``
(vLLM uses Python's ``random`` after the dataset has consumed it, so its draw cannot
be reproduced outside its own process); the same seed gives the same assignment.
"""

from __future__ import annotations

import numpy as np

from servelab.records import SampleRequest

_STREAM = 0x10A  # keeps these draws apart from the arrivals' generator of the same seed


def request_models(samples: list[SampleRequest], modules: tuple[str, ...], assignment: str,
                   seed: int) -> dict[str, str]:
    """request id -> adapter name, in request order; empty without modules."""
    if not modules:
        return {}
    if assignment == "round-robin":
        picks = [modules[i % len(modules)] for i in range(len(samples))]
    else:
        rng = np.random.default_rng([seed, _STREAM])
        picks = [modules[j] for j in rng.integers(0, len(modules), size=len(samples))]
    return {s.request_id: m for s, m in zip(samples, picks)}
