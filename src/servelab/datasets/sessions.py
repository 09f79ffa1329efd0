"""A run's agentic sessions from its DatasetSpec: ``weka`` reads a WEKA trace
(datasets/weka.py), ``otel`` an OpenTelemetry GenAI span export (datasets/otel.py),
``agentic`` draws synthetic sessions (datasets/agentic_synth.py); each scaled by
``--trace-scale``, cut to start points under ``--agentic-locked`` (datasets/agentx.py) and
bundled with one request per call (datasets/agentic.py)."""

from __future__ import annotations

import numpy as np

from servelab.config import DatasetSpec
from servelab.datasets.agentic import Blocks, Sessions, bundle, cap_waits, describe, scale
from servelab.datasets.agentic_synth import shape_from, synthesize
from servelab.datasets.agentx import IDLE_CAP_S, MARKER_TOKENS, Marked, recycled, start_points
from servelab.datasets.otel import looks_like_otel, read_otel
from servelab.datasets.weka import read_weka
from servelab.errors import DatasetError


def read_sessions(spec: DatasetSpec) -> tuple[list, dict]:
    """The spec's sessions, scaled, and what made them."""
    if not spec.trace_scale > 0:
        raise DatasetError(f"--trace-scale must be > 0, not {spec.trace_scale}")
    if spec.name in ("weka", "otel"):
        sessions, source = _read_trace(spec)
        sessions = sessions[: max(spec.num_prompts, 0)]
    else:
        shape = shape_from(spec.agentic_shape)
        sessions, source = synthesize(max(spec.num_prompts, 1), shape, np.random.default_rng(spec.seed)), {
            "synthetic": {"seed": spec.seed, "shape": {k: getattr(shape, k) for k in shape.__slots__}}}
    most = IDLE_CAP_S if spec.agentic_locked else spec.trace_max_wait_s
    scaled, capped = cap_waits(scale(sessions, spec.trace_scale), most)
    waits = {} if most is None else {"max_wait_s": most, "waits_capped": capped}
    return scaled, {**source, "trace_scale": spec.trace_scale, "scaled": spec.trace_scale != 1, **waits}


def _read_trace(spec: DatasetSpec) -> tuple[list, dict]:
    if spec.path is None:
        what = "a WEKA agentic trace" if spec.name == "weka" else "an OTLP JSON span export"
        raise DatasetError(f"--dataset-path is required for --dataset-name {spec.name} ({what})")
    if spec.name == "weka":
        if looks_like_otel(spec.path):
            raise DatasetError(f"{spec.path}: an OpenTelemetry span export (resourceSpans), not a WEKA trace: "
                               "use --dataset-name otel")
        return read_weka(spec.path), {"trace": spec.path}
    got = read_otel(spec.path)
    return got.sessions, {"trace": spec.path, "trace_format": "otel", "otel": got.about}


def sample_sessions(spec: DatasetSpec, tokenizer, lanes: int | None = None) -> Sessions:
    """The sessions to send; ``lanes`` (--max-sessions) tells the locked scenario which of them
    start at a sampled point (datasets/agentx.start_points)."""
    sessions, about = read_sessions(spec)
    vocab = sorted(set(tokenizer.vocab_ids()) - tokenizer.special_ids)
    prefix = spec.request_id_prefix or "bench-"
    if not spec.agentic_locked:
        return bundle(sessions, prefix, {**about, **describe(sessions)}, Blocks(vocab))
    measured, warm, drawn = start_points(sessions, np.random.default_rng(spec.seed), lanes)
    until = spec.agentic_min_duration_s if lanes is not None else None
    pool, recycling = recycled(sessions, measured, lanes, until) if until is not None else ([], {})
    blocks = Marked(vocab)
    locked = {"locked": {**drawn, **recycling, "cache_bust_nonce": blocks.nonce, "marker_tokens": MARKER_TOKENS}}
    return bundle(measured + pool, prefix, {**about, **describe(measured), **locked}, blocks, tuple(warm), until)
