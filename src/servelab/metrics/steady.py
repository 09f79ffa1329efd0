"""A run's steady state: its plateau, and what the engine delivered on it.

Whole-run throughput (vLLM's figure) divides everything by the run's duration, so the
ramp-up (requests sent, nothing back yet) and the drain (the last requests finishing
with nothing behind them) dilute it. The plateau is ``metrics/window.py``'s rule with
one replica — from the ramp-up's end to the drain's start — read per load shape:

    rate    a finite --request-rate: requests leave as others arrive; the rule as is.
    closed  --request-rate inf with --max-concurrency: a closed loop; each finished
            request is replaced at once, so the rule as is (the opening burst is the cap).
    burst   --request-rate inf with no cap: every request is sent at t0; from the first
            completion on nothing replaces one, in-flight only falls — no plateau, and
            no number is given for one.
    ramp    --ramp-up-strategy: the offered rate climbs through what the engine serves;
            the plateau starts where it got there. Within the rule's window, output tok/s
            is binned (``RAMP_BINS`` equal bins); the level is the mean of the last quarter
            of the bins (the ramp ends above what the engine serves, or there is no
            plateau); smoothed over 3 bins, the last triple more than ``BELOW_LEVEL`` under
            the level is still the rise, and the plateau starts after it. A vLLM ramp is
            linear in the request's index, so in time the offered rate grows
            exponentially and the knee is sharp. If the plateau is shorter than
            ``MIN_PLATEAU_BINS``, or its second half delivers more than ``STILL_RISING``
            over its first, the ramp never reached what the engine serves: no plateau.

Every shape: a window is judged a plateau only over at least ``MIN_PLATEAU_REQUESTS``
requests completed in it and at least ``MIN_PLATEAU_LIFETIMES`` × their median end-to-end
latency: a shorter window never saw its load replace itself (in a closed loop, each slot's
request followed by the next), so a level in it is no evidence of a plateau — it says "too
short to judge" and gives no number.

Inside the plateau, counting is the window's (tokens by arrival, requests by their last
token); latencies are of the requests completed in it.
"""

from __future__ import annotations

import numpy as np

from servelab.metrics.tally import OK, Tally
from servelab.metrics.window import NS_PER_S, Window, count_columns, inside, latency_ms, ramp_and_drain

SHAPES = ("rate", "closed", "burst", "ramp")
RAMP_BINS = 40
BELOW_LEVEL = 0.10  # a bin this far under the level is still on the rise
MIN_PLATEAU_BINS = RAMP_BINS // 8
STILL_RISING = 0.05
MIN_PLATEAU_REQUESTS = 20  # completed in the window
MIN_PLATEAU_LIFETIMES = 2  # × the median E2EL of those requests
LENGTH_RULE = (f"judged only over ≥ {MIN_PLATEAU_REQUESTS} requests completed in it and ≥ {MIN_PLATEAU_LIFETIMES} × "
               "their median E2EL")
_CHUNK = 1 << 13  # requests whose events are rebuilt at a time (a big run's events are not held at once)
RULES = {
    "rate": "finite request rate: from the ramp-up's end (the first completion, once every request sent "
            "before it streams) to the drain's start (the last send)",
    "closed": "closed loop (rate inf, concurrency capped): from the ramp-up's end (the first completion, once "
              "the opening burst streams) to the drain's start (the last send)",
    "ramp": f"ramped rate: from where output tok/s reached its level ({RAMP_BINS} bins, smoothed over 3; "
            f"level: the last quarter's mean; the rise: under {1 - BELOW_LEVEL:.0%} of it) to the drain's start "
            "(the last send)",
}
BURST = ("--request-rate inf with no --max-concurrency sends every request at t0: nothing replaces a finished "
         "request, so in-flight only falls — there is no plateau to measure")


def shape_of(request_rate: float, max_concurrency: int | None, ramp_up_strategy: str | None) -> str:
    if ramp_up_strategy is not None:
        return "ramp"
    if request_rate == float("inf"):
        return "burst" if max_concurrency is None else "closed"
    return "rate"


def steady_state(tally: Tally, t0_ns: int, shape: str, percentiles) -> dict:
    """The result's ``steady_state`` section: the plateau's bounds (s from t0), its rates, its
    latencies and what was cut; or ``{"plateau": False, "why": …}``."""
    if shape == "burst":
        return {"shape": shape, "plateau": False, "why": BURST}
    c, ok = tally.col, tally.mask(OK) & (tally.col["events"] > 0)
    sent = c["status"].astype(bool) & (c["sent_ns"] != 0)
    span = ramp_and_drain(c["sent_ns"][ok], c["first_ns"][ok], c["last_ns"][ok],
                          int(c["sent_ns"][sent].max()) if sent.any() else 0)
    if span is None:
        return {"shape": shape, "plateau": False, "why": "no request completed with a streamed token"}
    window = Window(span.ramp_end_ns, span.drain_start_ns)
    if shape == "ramp" and not window.empty:
        window, why = _ramp_plateau(tally, window)
        if why:
            return {"shape": shape, "plateau": False, "why": why}
    if window.empty:
        return {"shape": shape, "plateau": False,
                "why": f"the drain began {-window.length_s:.2f} s before the ramp-up ended: more requests "
                       "than run at once are needed for a plateau"}
    if (why := _too_short(tally, window)) is not None:
        return {"shape": shape, "plateau": False, "why": why}
    return _section(tally, t0_ns, shape, window, percentiles)


def _too_short(tally: Tally, window: Window) -> str | None:
    """Why the window is too short to judge a plateau (the module's length rule), or None."""
    c, ok = tally.col, np.flatnonzero(tally.mask(OK) & (tally.col["events"] > 0))
    done = ok[inside(window, c["last_ns"][ok])]
    life_s = float(np.median(c["last_ns"][done] - c["sent_ns"][done])) / NS_PER_S if len(done) else 0.0
    need_s = MIN_PLATEAU_LIFETIMES * life_s
    if len(done) >= MIN_PLATEAU_REQUESTS and window.length_s >= need_s:
        return None
    return (f"too short to judge: {window.length_s:.2f} s with {len(done)} requests completed in it; a plateau is "
            f"{LENGTH_RULE} ({need_s:.2f} s here)")


def _section(tally: Tally, t0_ns: int, shape: str, window: Window, percentiles) -> dict:
    c, ok = tally.col, np.flatnonzero(tally.mask(OK) & (tally.col["events"] > 0))
    got = count_columns(_events(tally, ok), c["last_ns"][ok], window)
    done = ok[inside(window, c["last_ns"][ok])]
    in_tokens = int(c["prompt_len"][done].sum())
    return {"shape": shape, "plateau": True, "rule": f"{RULES[shape]}; {LENGTH_RULE}",
            "start_s": (window.start_ns - t0_ns) / NS_PER_S, "end_s": (window.end_ns - t0_ns) / NS_PER_S,
            "length_s": window.length_s, "output_tok_s": got.output_tok_s, "req_s": got.req_s,
            "total_tok_s": (got.tokens + in_tokens) / window.length_s,
            "output_tokens": got.tokens, "requests": got.requests, "prompt_tokens": in_tokens,
            "tokens_cut": got.tokens_cut, "requests_cut": got.requests_cut,
            "latency_ms": {name: latency_ms({name: of()}, percentiles)[name]  # one at a time: 4 MB each at 500k
                           for name, of in _latencies(tally, done).items()}}


def _latencies(tally: Tally, idx: np.ndarray) -> dict:
    """TTFT, TPOT and E2EL (ns) of requests ``idx``, by the summary's own definitions: each
    made when it is called."""
    c = tally.col

    def tpot() -> np.ndarray:
        out = c["output_tokens"][idx]
        many = idx[out > 1]
        return (c["last_ns"][many] - c["first_ns"][many]) / (c["output_tokens"][many].astype(np.int64) - 1)

    return {"ttft": lambda: c["first_ns"][idx] - c["sent_ns"][idx], "tpot": tpot,
            "e2el": lambda: c["last_ns"][idx] - c["sent_ns"][idx]}


def _events(tally: Tally, idx: np.ndarray):
    for k in range(0, len(idx), _CHUNK):
        yield tally.token_instants(idx[k:k + _CHUNK])


def _ramp_plateau(tally: Tally, window: Window) -> tuple[Window, str | None]:
    """Where a ramped rate reached what the engine serves (module docstring), or why it never did."""
    rates, bin_ns = _bins(tally, window)
    level = rates[-RAMP_BINS // 4:].mean()
    smooth = np.convolve(rates, np.ones(3) / 3, mode="valid")  # smooth[i]: bins i, i+1, i+2
    low = np.flatnonzero(smooth < (1 - BELOW_LEVEL) * level)
    start = int(low[-1]) + 3 if len(low) else 0  # past every bin of the last low triple
    plateau = rates[start:]
    half = len(plateau) // 2
    rise = plateau[half:].mean() / plateau[:half].mean() - 1 if half and plateau[:half].mean() > 0 else None
    if len(plateau) < MIN_PLATEAU_BINS or rise is None or rise > STILL_RISING:
        said = f"rose {rise:.0%} across" if rise is not None else "had no level over"
        return window, (f"the ramp never reached what the engine serves: output tok/s still {said} the last "
                        f"{len(plateau)} of the window's {RAMP_BINS} bins")
    return Window(window.start_ns + start * bin_ns, window.end_ns), None


def _bins(tally: Tally, window: Window) -> tuple[np.ndarray, int]:
    """Output tok/s in ``RAMP_BINS`` equal bins over the window (the last takes the remainder)."""
    bin_ns = max(1, (window.end_ns - window.start_ns) // RAMP_BINS)
    tokens = np.zeros(RAMP_BINS)
    for times, weights in _events(tally, np.flatnonzero(tally.mask(OK))):
        keep = inside(window, times)
        b = np.minimum((times[keep] - window.start_ns) // bin_ns, RAMP_BINS - 1)
        tokens += np.bincount(b, weights=weights[keep], minlength=RAMP_BINS)
    return tokens * NS_PER_S / bin_ns, int(bin_ns)


def lines(section: dict) -> list[str]:
    """servelab's console lines for the steady state (printed after vLLM's rows)."""
    if not section["plateau"]:
        return [f"servelab: steady state: none — {section['why']}"]
    s, lat = section, section["latency_ms"]
    head = (f"servelab: steady state t0+{s['start_s']:.2f} s … t0+{s['end_s']:.2f} s ({s['length_s']:.2f} s, "
            f"{s['shape']}): {s['output_tok_s']:.2f} output tok/s, {s['req_s']:.3f} req/s; cut outside it "
            f"(ramp-up, drain): {s['requests_cut']} requests, {s['tokens_cut']} tokens")
    parts = [f"{name.upper()} " + " ".join(f"{k} {v:.2f}" for k, v in stats.items() if k != "mean")
             for name, stats in lat.items() if stats]
    return [head, "servelab: steady-state latency ms: " + " · ".join(parts)] if parts else [head]
