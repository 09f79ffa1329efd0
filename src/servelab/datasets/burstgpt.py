"""BurstGPT's request-size trace (vLLM's ``burstgpt`` dataset): synthetic prompts
of the sizes Azure OpenAI GPT-4 users sent.

File: BurstGPT's CSV, columns ``Timestamp, Model, Request tokens, Response
tokens, Total tokens, Log Type``. As vLLM: only rows whose Model is ``GPT-4``
and whose Response tokens > 0; ``--num-prompts`` rows drawn as pandas'
``DataFrame.sample(n, random_state=seed)`` draws them — numpy's legacy
``RandomState(seed).choice(rows, n, replace=n > rows)`` — so the same seed picks the
same rows. Request i's prompt is the text of ids ``(i + j) mod vocab`` for
j < Request tokens, and ``prompt_len`` is Request tokens (vLLM does not re-encode
the text); its output length is Response tokens. The trace's timestamps are not
used (vLLM's arrival process sets the send times); shuffle and oversampling flags
do not apply (the draw is already random, with replacement when short).
"""

from __future__ import annotations

import csv

import numpy as np

from servelab.config import DatasetSpec
from servelab.datasets.files import read_text
from servelab.datasets.tokenizer import Tokenizer
from servelab.errors import DatasetError
from servelab.records import SampleRequest

COLUMNS = ("Model", "Request tokens", "Response tokens")


def sample_burstgpt(spec: DatasetSpec, tokenizer: Tokenizer) -> list[SampleRequest]:
    if spec.path is None:
        raise DatasetError("--dataset-path is required for --dataset-name burstgpt (BurstGPT's CSV)")
    rows = gpt4_rows(spec.path)
    picks = np.random.RandomState(spec.seed).choice(len(rows), size=spec.num_prompts,
                                                    replace=spec.num_prompts > len(rows))
    sizes = [rows[k] for k in picks]
    texts = tokenizer.decode_batch([[(i + j) % tokenizer.vocab_size for j in range(n)]
                                    for i, (n, _) in enumerate(sizes)])
    return [SampleRequest(text, n, out, f"{spec.request_id_prefix}{i}")
            for i, (text, (n, out)) in enumerate(zip(texts, sizes))]


def gpt4_rows(path: str) -> list[tuple[int, int]]:
    """(request tokens, response tokens) of the GPT-4 rows that got a response."""
    reader = csv.DictReader(read_text(path).splitlines())
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise DatasetError(f"{path}: not a BurstGPT CSV (no column {', '.join(map(repr, missing))})")
    rows = []
    for number, row in enumerate(reader, start=2):
        if row["Model"] != "GPT-4":
            continue
        try:
            request, response = int(float(row["Request tokens"])), int(float(row["Response tokens"]))
        except (TypeError, ValueError, OverflowError):  # OverflowError: "inf" is a float, not a count
            raise DatasetError(f"{path}:{number}: Request tokens and Response tokens must be numbers") from None
        if request < 0:
            raise DatasetError(f"{path}:{number}: Request tokens must be >= 0, not {request}")
        if response > 0:
            rows.append((request, response))
    if not rows:
        raise DatasetError(f"{path}: no GPT-4 row with Response tokens > 0 (vLLM's burstgpt filter)")
    return rows
