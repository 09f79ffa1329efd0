"""What a sampler returns: the requests in send order, and where vLLM's arrival
stream stands after the dataset drew from it.

``vllm bench serve`` draws the send times from numpy's global legacy stream,
seeded with ``--seed``; most datasets never touch that stream, but
``prefix_repetition`` draws its prompts from it first, so its schedule starts
further along. ``arrival_state`` (``RandomState.get_state()``, or None for a fresh
stream) lets the load generator continue exactly there. A plain list, so every
caller that only wants the requests still gets them.
"""

from __future__ import annotations

from servelab.records import SampleRequest


class Sample(list[SampleRequest]):
    def __init__(self, requests=(), arrival_state: tuple | None = None) -> None:
        super().__init__(requests)
        self.arrival_state = arrival_state
