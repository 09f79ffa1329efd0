"""Agreement with a reference's answers, and the reference's own floor.

Answers pair by prompt key (``responses.py``), never by position. Per run: the share of
answers identical to the reference's, the mean share of each answer's tokens before its
first divergence (tokens here: words and punctuation marks, ``pieces``; the server's token
ids are not kept), and where divergence starts (percentiles of the first differing
position, over the answers that differ).

The floor: batch-dependent kernels make an unchanged configuration diverge a little, so the
reference is compared with its own repeats (other loads, other runs); the floor is the lowest
identical share among those pairs (1.0, identity, with one reference run). A candidate
*diverges beyond it* when even the top of its identical share's 95 % Wilson interval is below
the floor; otherwise it is *the same within the reference's own variation*. A run that
sampled (temperature above 0, or not sent) is *not comparable: sampled*, never "diverges".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from servelab.errors import InputError
from servelab.quality.responses import Responses
from servelab.quality.score import wilson

SAME, DIVERGES, SAMPLED = "same within its own variation", "diverges beyond it", "not comparable: sampled"
_PIECE = re.compile(r"\w+|[^\w\s]")


def pieces(text: str) -> list[str]:
    return _PIECE.findall(text)


def first_divergence(ref: list[str], other: list[str]) -> int | None:
    """The first position where the two differ (a length difference counts), or None."""
    for k, (a, b) in enumerate(zip(ref, other)):
        if a != b:
            return k
    return None if len(ref) == len(other) else min(len(ref), len(other))


@dataclass(frozen=True, slots=True)
class Agreement:
    paired: int
    identical: int
    prefix_share: float  # mean over paired answers of (tokens before the first divergence) / (reference's tokens)
    diverge_at: dict[str, float]  # p10/p50/p90 of the first differing token, over differing answers
    failed: int  # the candidate's failed requests (not paired, not counted as wrong)

    @property
    def share(self) -> float:
        return self.identical / self.paired if self.paired else float("nan")


def agree(ref: Responses, run: Responses) -> Agreement:
    """``run``'s answers against ``ref``'s; both must be answers to the same prompts."""
    check_same_prompts(ref, run)
    shares, at = [], []
    for key in sorted(set(ref.texts) & set(run.texts)):
        a, b = pieces(ref.texts[key]), pieces(run.texts[key])
        k = first_divergence(a, b)
        shares.append(1.0 if k is None else k / max(len(a), 1))
        if k is not None:
            at.append(k)
    pct = {f"p{p}": float(np.percentile(at, p)) for p in (10, 50, 90)} if at else {}
    return Agreement(len(shares), len(shares) - len(at), float(np.mean(shares)) if shares else float("nan"),
                     pct, run.failed)


def check_same_prompts(ref: Responses, run: Responses) -> None:
    """One line when the two runs asked other prompts (failed requests aside)."""
    mine, theirs = run.asked, ref.asked
    only = len(mine - theirs)
    if only:
        raise InputError(f"{run.name}: {only} of its {len(mine)} prompts are not in the reference {ref.name} "
                         f"(a reference must be a run of the same requests)")


@dataclass(frozen=True, slots=True)
class Floor:
    share: float  # the lowest identical share among the reference's own pairs
    prefix_share: float
    pairs: int  # 0: one reference run, identity assumed


def floor(runs: list[Responses]) -> Floor:
    """The reference's own variation: every pair of its repeats."""
    pairs = [agree(a, b) for i, a in enumerate(runs) for b in runs[i + 1:]]
    if not pairs:
        return Floor(1.0, 1.0, 0)
    return Floor(min(p.share for p in pairs), min(p.prefix_share for p in pairs), len(pairs))


def verdict(run: Responses, a: Agreement | None, f: Floor) -> str:
    if run.sampled:
        return SAMPLED
    lo, hi = wilson(a.identical, a.paired)
    return DIVERGES if hi < f.share else SAME


def line(name: str, run: Responses, a: Agreement | None, f: Floor) -> str:
    said = verdict(run, a, f)
    if said == SAMPLED:
        return f"{name}: agreement {SAMPLED} (temperature {run.sampling.get('temperature')!r}; send --temperature 0)"
    where = (f", divergence starts at token p10 {a.diverge_at['p10']:g} · p50 {a.diverge_at['p50']:g} · "
             f"p90 {a.diverge_at['p90']:g}") if a.diverge_at else ""
    base = "identity (one reference run)" if not f.pairs else f"{f.share:.1%} over {f.pairs} reference pair(s)"
    return (f"{name}: agreement {a.identical}/{a.paired} identical ({a.share:.1%}), {a.prefix_share:.1%} of tokens "
            f"before the first divergence{where}; floor {base} → {said}")


def as_dict(a: Agreement, f: Floor, said: str) -> dict:
    return {"paired": a.paired, "identical": a.identical, "share": a.share, "prefix_share": a.prefix_share,
            "diverge_at": a.diverge_at, "failed": a.failed,
            "floor": {"share": f.share, "prefix_share": f.prefix_share, "pairs": f.pairs}, "verdict": said}
