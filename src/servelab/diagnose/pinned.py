"""Did a cap pin the batch? The question every "busy compute" verdict asks first.

A CPU engine keeps its cores busy at any batch, as a GPU reads 100 % utilized at batch 1:
busy is not saturated. So ``cpu-compute-bound`` (host.py) and ``memory-bandwidth-bound``
(gpu.py) are named only when no cap pinned the batch — running below every cap
(max_num_seqs, the client's --max-concurrency) with nothing waiting for a slot. With a cap
pinned, the cap is the verdict (its own rule names it), and whether a larger batch uses
the same compute better is the next run's to measure: ``optimize`` raises the cap and keeps
the change only beyond noise, which is how "more concurrency buys nothing" is measured.
"""

from __future__ import annotations

from servelab.diagnose.evidence import Evidence
from servelab.diagnose.rules import PARTIAL, family, known_cap
from servelab.diagnose.spans import spell


# A cap pins the batch in a sample when the engine runs at its known count cap, or anything waits
# for a slot: at the engine (its count, token budget or cache held it) or at the client (its
# --max-concurrency). Busy compute under a pinned batch is not a compute limit: a CPU engine keeps
# its cores busy at any batch, as a GPU reads 100 % utilized at batch 1, and a larger batch uses the
# same compute better. Pinned in ≥ PARTIAL of the loaded samples (the engine's, or the client's) is
# a cap, named by its own rule; below, it is a burst being admitted.
def pinned(ev: Evidence) -> bool | None:
    """Did a cap pin the batch for ≥ PARTIAL of the loaded run? None when it cannot be told: the
    engine was not seen (a token budget or a full cache may have held a queue there)."""
    f, e, c = ev.facts, ev.engine, ev.client
    shares = []
    if c is not None:
        cap = f.max_concurrency
        shares.append(spell(c.t_s, [w >= 1 or (cap is not None and x >= cap) for x, w in zip(c.in_flight, c.waiting)],
                            ev.tick_s).share)
    if e is not None:
        seqs = known_cap(f, family(e))
        shares.append(spell(e.t_s, [w >= 1 or (seqs is not None and r >= seqs) for r, w in zip(e.running, e.waiting)],
                            ev.tick_s).share)
    if any(x >= PARTIAL for x in shares):
        return True
    return None if e is None else False
