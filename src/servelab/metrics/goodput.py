"""Goodput in tokens as well as requests, and SLO attainment per metric (servelab's own).

With ``--goodput ttft:MS tpot:MS e2el:MS`` (vLLM's flag; vLLM reports request goodput only):

* a request is *good* when it succeeded and meets every SLO given (TPOT of a one-token
  request counts as 0, as in vLLM);
* request goodput = good requests / duration (vLLM's ``request_goodput``);
* token goodput  = output tokens of good requests / duration; total token goodput adds
  their prompt tokens. A run that meets its request SLOs mostly on short replies shows
  a token goodput well below its output throughput;
* attainment of one SLO = requests meeting that SLO alone / every request of the run
  (a failed request meets none); ``all`` = good requests / every request.
"""

from __future__ import annotations

from servelab.metrics.summary import NS_PER_MS, tpot_ns
from servelab.records import RequestRecord


def slo_values_ns(r: RequestRecord) -> dict[str, float]:
    return {"ttft": r.ttft_ns, "tpot": tpot_ns(r) or 0.0, "e2el": r.e2el_ns}


def meets(r: RequestRecord, slo_ms: dict[str, float]) -> dict[str, bool]:
    """Whether ``r`` meets each SLO on its own (a failed request meets none)."""
    if not r.success:
        return {k: False for k in slo_ms}
    values = slo_values_ns(r)
    return {k: values[k] <= limit * NS_PER_MS for k, limit in slo_ms.items()}


def goodput_section(records: list[RequestRecord], duration_s: float, slo_ms: dict[str, float]) -> dict:
    """The result's ``servelab.goodput``: the SLOs, goodputs per second, attainment per SLO."""
    verdicts = [meets(r, slo_ms) for r in records]
    good = [r for r, v in zip(records, verdicts) if all(v.values())]
    n = len(records)
    per_s = (lambda x: x / duration_s) if duration_s > 0 else (lambda x: 0.0)  # noqa: E731
    attainment = {k: sum(v[k] for v in verdicts) / n if n else 0.0 for k in slo_ms}
    attainment["all"] = len(good) / n if n else 0.0
    return {
        "slo_ms": dict(slo_ms), "good_requests": len(good), "requests": n,
        "request_goodput": per_s(len(good)),
        "output_token_goodput": per_s(sum(r.output_tokens for r in good)),
        "total_token_goodput": per_s(sum(r.output_tokens + r.prompt_len for r in good)),
        "attainment": attainment,
    }


def goodput_lines(section: dict) -> list[str]:
    slo = ", ".join(f"{k} <= {v:g} ms" for k, v in section["slo_ms"].items())
    met = ", ".join(f"{k} {v:.1%}" for k, v in section["attainment"].items())
    return [f"servelab: goodput ({slo}): {section['request_goodput']:.2f} req/s, "
            f"{section['output_token_goodput']:.2f} output tok/s, "
            f"{section['total_token_goodput']:.2f} total tok/s; SLO met: {met}"]
