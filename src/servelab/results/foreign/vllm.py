"""``vllm bench serve --save-result``: the format servelab's own result extends.

Markers (no version key): ``date`` (YYYYMMDD-HHMMSS), ``endpoint_type``, ``tokenizer_id``,
``num_prompts``, and no ``servelab`` section; ``--append-result`` writes one object a line.
Its keys are servelab's, so the result is kept as it is and only says where it came from.
"""

from __future__ import annotations

import re

from servelab.results.foreign.shape import foreign_result

NOT_COMPUTABLE = ("steady state (aggregates; vLLM's per-request lists hold no token instants)",
                  "diagnosis (no engine telemetry)")
_DATE = re.compile(r"\d{8}-\d{6}$")


def recognise(doc) -> bool:
    return (isinstance(doc, dict) and "servelab" not in doc and isinstance(doc.get("date"), str)
            and bool(_DATE.match(doc["date"])) and {"endpoint_type", "tokenizer_id", "num_prompts"} <= set(doc))


def read(doc: dict) -> dict:
    marked = foreign_result("vllm bench serve", doc.get("vllm_version"), "vLLM --save-result JSON", {},
                            not_computable=NOT_COMPUTABLE)
    return {**doc, "servelab": marked["servelab"]}
