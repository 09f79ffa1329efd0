"""``--stop-when-saturated``, ``--stop-on-errors``, ``--stop-on-error-rate``: the run's stop
rules (judged by loadgen/watch.py), for ``bench`` and ``sweep`` alike. A sweep turns
``--stop-when-saturated`` into "judge each point, end the ladder after the first one
judged over-saturated" (sweep/ladder.py); bench ends the run itself."""

from __future__ import annotations

import argparse

from servelab.errors import InputError


def add_stop_arguments(g) -> None:
    """The stop rules, in the load group."""
    g.add_argument("--stop-when-saturated", action="store_true",
                   help="end the run once the server is judged over-saturated: requests outstanding and TTFT "
                        "both rising over the last 10 s, or the whole run while shorter, judged from 2 s in "
                        "(OLS slope, one-sided 95 %% bound above zero); needs a finite --request-rate or a "
                        "ramp; in a sweep, end the ladder after the first point judged so (each point runs in "
                        "full)")
    g.add_argument("--stop-on-errors", type=int, default=None, metavar="N",
                   help="end the run once N requests have failed (a circuit breaker)")
    g.add_argument("--stop-on-error-rate", default=None, metavar="P:WINDOW_S",
                   help="end the run once the share of failed requests among those finished in the last "
                        "WINDOW_S seconds reaches P (0-1; at least 10 finished), e.g. 0.5:10")


def stop_fields(args: argparse.Namespace) -> dict:
    """LoadSpec's stop-rule fields from the flags."""
    return {"saturation": "stop" if getattr(args, "stop_when_saturated", False) else "off",
            "stop_on_errors": getattr(args, "stop_on_errors", None),
            "stop_on_error_rate": parse_error_rate(getattr(args, "stop_on_error_rate", None))}


def parse_error_rate(text: str | None) -> tuple[float, float] | None:
    """'P:WINDOW_S' → (P, WINDOW_S); one line naming the flag when it is not that."""
    if text is None:
        return None
    share, _, window = text.partition(":")
    try:
        p, w = float(share), float(window)
    except ValueError:
        raise InputError(f"--stop-on-error-rate: expected P:WINDOW_S (e.g. 0.5:10), got {text!r}") from None
    if not (0 < p <= 1) or not w > 0:
        raise InputError(f"--stop-on-error-rate: P must be in (0, 1] and WINDOW_S > 0, got {text!r}")
    return p, w
