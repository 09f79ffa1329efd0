"""``vllm bench serve --save-result``: the format servelab's own result extends.

Markers (no version key): ``date`` (YYYYMMDD-HHMMSS), ``endpoint_type``, ``tokenizer_id``,
``num_prompts``, and no ``servelab`` section; ``--append-result`` writes one object a line.
Its keys are servelab's, so the result is kept and says where it came from. With
``--save-detailed`` its per-request lists (``start_times``: each send on the perf_counter
clock; ``ttfts``, ``itls``, ``latencies`` in seconds) rebuild every request's events, and
servelab computes its own statistics and steady state from them.
"""

from __future__ import annotations

import re

from servelab.records import RequestRecord
from servelab.results.foreign.own import own, steady
from servelab.results.foreign.shape import foreign_result

NOT_COMPUTABLE = ("steady state (aggregates; run vLLM with --save-detailed for the per-request lists)",
                  "diagnosis (no engine telemetry)")
DETAILED = ("start_times", "ttfts", "itls", "latencies", "output_lens", "input_lens", "errors")
_DATE = re.compile(r"\d{8}-\d{6}$")
NS = 1e9


def recognise(doc) -> bool:
    return (isinstance(doc, dict) and "servelab" not in doc and isinstance(doc.get("date"), str)
            and bool(_DATE.match(doc["date"])) and {"endpoint_type", "tokenizer_id", "num_prompts"} <= set(doc))


def read(doc: dict) -> dict:
    lists = [doc.get(k) for k in DETAILED]
    detailed = all(isinstance(x, list) for x in lists) and len({len(x) for x in lists}) == 1 and lists[0]
    if not detailed:
        marked = foreign_result("vllm bench serve", doc.get("vllm_version"), "vLLM --save-result JSON", {},
                                not_computable=NOT_COMPUTABLE)
        return {**doc, "servelab": marked["servelab"]}
    o = own([_record(i, *row) for i, row in enumerate(zip(*lists, doc.get("queue_times") or [0.0] * len(lists[0])))])
    marked = foreign_result("vllm bench serve", doc.get("vllm_version"), "vLLM --save-result JSON (--save-detailed)",
                            {}, not_computable=("diagnosis (no engine telemetry)",),
                            notes=[f"statistics computed by servelab from its {len(lists[0])} per-request lists"])
    result = {**doc, **o.figures, "num_prompts": doc["num_prompts"], "servelab": marked["servelab"]}
    result["servelab"]["steady_state"] = steady(o, doc.get("request_rate"), doc.get("max_concurrency"))
    return result


def _record(i: int, start: float, ttft: float, itls: list, latency: float, out: int, prompt: int, error: str,
            queue: float) -> RequestRecord:
    sent = round(start * NS)
    base = dict(request_id=str(i), prompt_len=int(prompt), expected_output_len=None,
                intended_ns=sent - round((queue or 0.0) * NS), dispatched_ns=sent - round((queue or 0.0) * NS),
                sent_ns=sent, done_ns=sent + round(latency * NS))
    if error:
        return RequestRecord(**base, error=str(error))
    t, tokens = sent + round(ttft * NS), []
    for gap in [0.0, *itls]:
        t += round(gap * NS)
        tokens.append(t)
    return RequestRecord(**base, token_ns=tuple(tokens), token_counts=(1,) * len(tokens), output_tokens=int(out),
                         prompt_len_source="usage")
