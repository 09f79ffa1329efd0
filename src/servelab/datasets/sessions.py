"""A run's agentic sessions from its DatasetSpec: ``weka`` reads a WEKA trace
(datasets/weka.py), ``agentic`` draws synthetic sessions (datasets/agentic_synth.py);
both scaled by ``--trace-scale`` and bundled with one request per call (datasets/agentic.py)."""

from __future__ import annotations

import numpy as np

from servelab.config import DatasetSpec
from servelab.datasets.agentic import Blocks, Sessions, bundle, cap_waits, describe, scale
from servelab.datasets.agentic_synth import shape_from, synthesize
from servelab.datasets.weka import read_weka
from servelab.errors import DatasetError


def read_sessions(spec: DatasetSpec) -> tuple[list, dict]:
    """The spec's sessions, scaled, and what made them."""
    if not spec.trace_scale > 0:
        raise DatasetError(f"--trace-scale must be > 0, not {spec.trace_scale}")
    if spec.name == "weka":
        if spec.path is None:
            raise DatasetError("--dataset-path is required for --dataset-name weka (a WEKA agentic trace)")
        sessions, source = read_weka(spec.path)[: max(spec.num_prompts, 0)], {"trace": spec.path}
    else:
        shape = shape_from(spec.agentic_shape)
        sessions, source = synthesize(max(spec.num_prompts, 1), shape, np.random.default_rng(spec.seed)), {
            "synthetic": {"seed": spec.seed, "shape": {k: getattr(shape, k) for k in shape.__slots__}}}
    scaled, capped = cap_waits(scale(sessions, spec.trace_scale), spec.trace_max_wait_s)
    waits = {} if spec.trace_max_wait_s is None else {"max_wait_s": spec.trace_max_wait_s, "waits_capped": capped}
    return scaled, {**source, "trace_scale": spec.trace_scale, "scaled": spec.trace_scale != 1, **waits}


def sample_sessions(spec: DatasetSpec, tokenizer) -> Sessions:
    sessions, about = read_sessions(spec)
    vocab = sorted(set(tokenizer.vocab_ids()) - tokenizer.special_ids)
    prefix = spec.request_id_prefix or "bench-"
    return bundle(sessions, prefix, {**about, **describe(sessions)}, Blocks(vocab))
