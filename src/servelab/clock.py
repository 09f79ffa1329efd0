"""The process's own clocks, read the same way everywhere: the CPU time it has used
(user + system, all threads) for the client's CPU share, the live panel and each worker's
report. Time stamps themselves are ``time.perf_counter_ns()``, taken where they happen."""

from __future__ import annotations

import resource


def cpu_s() -> float:
    """This process's CPU seconds so far (getrusage: user + system)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime
