"""What happens to each request, decided when it is parsed: fail or not, and how long.

Draws come from two seeded generators (failures, lengths) taken in arrival order, so a
seed fixes the sequence of outcomes: the k-th request parsed gets the k-th draw, and a
run of N requests fails the same number of times on every run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from servelab.mock.config import MockConfig


@dataclass(frozen=True, slots=True)
class Plan:
    failure: str | None  # None, or one of config.FAILURE_KINDS
    n_tokens: int
    finish_reason: str  # "length" | "stop"


class Planner:
    def __init__(self, config: MockConfig) -> None:
        self.config = config
        seeds = np.random.SeedSequence(config.seed).spawn(2)
        self._fail_rng = np.random.default_rng(seeds[0])
        self._len_rng = np.random.default_rng(seeds[1])

    def next(self, max_tokens: int, ignore_eos: bool) -> Plan:
        return Plan(self._failure(), *self._length(max_tokens, ignore_eos))

    def _failure(self) -> str | None:
        cfg = self.config
        if cfg.error_rate <= 0 or self._fail_rng.random() >= cfg.error_rate:
            return None
        kinds = cfg.failure_kinds
        return kinds[int(self._fail_rng.integers(len(kinds)))] if len(kinds) > 1 else kinds[0]

    def _length(self, max_tokens: int, ignore_eos: bool) -> tuple[int, str]:
        rng = self.config.output_len_range
        n = max_tokens if rng is None else int(self._len_rng.integers(rng[0], rng[1] + 1))
        eos = self.config.eos_len
        if eos is not None and not ignore_eos and eos < n:
            return eos, "stop"
        return n, "length"
