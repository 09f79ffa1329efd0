"""What a dataset yields for a run: the requests in send order, and where vLLM's
arrival stream stands after the dataset drew from it.

``vllm bench serve`` draws the send times from numpy's global legacy stream,
seeded with ``--seed``; most datasets never touch that stream, but
``prefix_repetition`` draws its prompts from it first, so its schedule starts
further along. ``arrival_state`` (``RandomState.get_state()``, or None for a fresh
stream) lets the load generator continue exactly there. Both travel together as one
frozen value and are handed to the schedule by name (loadgen/drive.schedule): a
slice or a copy of the requests carries no hidden state that could change it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from servelab.datasets.requests import Requests
from servelab.records import SampleRequest


@dataclass(frozen=True, slots=True, eq=False)  # eq: the state holds a numpy array
class Sample:
    requests: Sequence[SampleRequest]  # datasets/requests.Requests: columns, not 500k objects
    arrival_state: tuple | None = None

    @classmethod
    def of(cls, requests, arrival_state: tuple | None = None) -> Sample:
        return cls(Requests.of(requests), arrival_state)
