"""Fit the planner's constants on the corpus's fit rows — and only those (``rows.fit_rows``).

Least squares with non-negative coefficients (``calibrate.nonnegative_least_squares``): a negative
bytes-per-token or a negative efficiency has no physical meaning, and clipping an unconstrained fit
would not be the best non-negative one.
"""

from __future__ import annotations

import math
import statistics

import numpy as np

from servelab.planner.calibrate import nonnegative_least_squares
from servelab.planner.corpus.replay import replay_speed, row_model, speed_engine, why_excluded
from servelab.planner.corpus.rows import Corpus, fit_rows
from servelab.planner.nonkv import GIB, NonKvConstants, ffn_width, v0_profile_batch
from servelab.planner.speed_model import (FAMILIES, FITTED_OVERLAP, MAX_CALIBRATED_TP, Efficiency, SpeedConstants,
                                          step_costs, ttft_s, weight_only)


def fit_nonkv(corpus: Corpus) -> NonKvConstants:
    """The activation factors from the V0 rows that logged their activation peak (relative error
    weighted, so a 0.2 GiB peak counts as much as a 3 GiB one); non-torch memory as the median the
    fit rows logged, with and without tensor parallel. The CUDA-graph pool stays the prior: no fit
    row logs it."""
    rows = fit_rows(corpus, [r for r in corpus.memory if not corpus.held_out(r)])
    profiled = [r for r in rows if r.era == "v0" and "activation_gib" in r.measured]
    columns, target = [], []
    for row in profiled:
        model = row_model(row)
        tokens, seqs = v0_profile_batch(row.max_model_len or model.max_position, row.max_num_batched_tokens,
                                        row.max_num_seqs)
        columns.append([tokens * ffn_width(model) / row.tensor_parallel, tokens * model.hidden,
                        min(seqs, tokens) * model.vocab * 4])
        target.append(row.measured["activation_gib"] * GIB)
    target_arr = np.array(target)
    ffn, hidden, sampler = nonnegative_least_squares(np.array(columns), target_arr, 1 / target_arr)
    tp1 = [r.measured["non_torch_gib"] for r in rows if "non_torch_gib" in r.measured and r.tensor_parallel == 1]
    tpn = [r.measured["non_torch_gib"] for r in rows if "non_torch_gib" in r.measured and r.tensor_parallel > 1]
    prior = NonKvConstants()
    return NonKvConstants(
        ffn_factor=round(float(ffn), 4), hidden_factor=round(float(hidden), 4), sampler_copies=round(float(sampler), 4),
        non_torch_gib=round(statistics.median(tp1), 4) if tp1 else prior.non_torch_gib,
        non_torch_tp_gib=round(statistics.median(tpn), 4) if tpn else prior.non_torch_tp_gib,
        cuda_graph_gib=prior.cuda_graph_gib,
        source=f"fitted on {len(profiled)} V0 startup logs of the corpus (fit rows only)")


def outside_scope(row) -> str:
    """Why a speed row is outside what the step model can represent ("" when it is inside): beyond
    ``speed_model.MAX_CALIBRATED_TP`` the per-layer all-reduce, which the step model has no term for,
    is most of a step, so such rows are shown, never fitted."""
    if row.tensor_parallel > MAX_CALIBRATED_TP:
        return (f"TP {row.tensor_parallel}: per-layer all-reduce across {row.tensor_parallel} GPUs, "
                "which the step model has no term for")
    return ""


def fit_speed(corpus: Corpus, per_seq_s: float = 0.0, weight_only_compute: float = 1.0) -> SpeedConstants:
    """Decode first: mean TPOT = overhead + per-sequence cost + bytes read / bandwidth x (1 + d_family),
    one overhead for all GPUs, d >= 0 per family (so no family reads faster than its datasheet). Then
    prefill: what TTFT leaves after the weight and KV reads = request cost + FLOPs / peak x (1 +
    c_family), on the rows whose TTFT is a real prefill (``replay.why_excluded``). Both on the fit rows
    at concurrency 1; the costs that show only under load come in fixed (``fit_load`` finds them).
    The weight read and the compute are added (``speed_model.FITTED_OVERLAP``), so the prefill fit is
    linear and solved as the decode one (an overlapped fit, searched, was tried: docs/planner.md)."""
    rows = fit_rows(corpus, [r for r in corpus.speed if not corpus.held_out(r)])
    rows = [r for r in rows if not r.workload.under_load and "mean_tpot_ms" in r.measured
            and not outside_scope(r)]
    # an MoE's fused-MoE kernels are not fitted (speed_model.moe_kernel, from vLLM's kernel
    # benchmarks): an MoE row here would have the overhead and the bandwidth absorb them
    pairs = [(r, e) for r, e in ((r, speed_engine(r)) for r in rows) if not e.model.experts]
    rows, engines = [r for r, _ in pairs], [e for _, e in pairs]
    names = sorted({FAMILIES[e.gpu.name] for e in engines if e.gpu.name in FAMILIES})
    overhead, *slow = _solve(list(zip(rows, engines)), names, _decode_column, "mean_tpot_ms",
                             lambda r, e: _decode_column(r, e) + per_seq_s)
    decode = SpeedConstants(float(overhead), 0.0, {n: Efficiency(bw_eff=1 / (1 + d)) for n, d in zip(names, slow)},
                            per_seq_s=per_seq_s, weight_only_compute=weight_only_compute, overlap=FITTED_OVERLAP)
    prefilled = [(r, e) for r, e in zip(rows, engines) if "mean_ttft_ms" in r.measured
                 and not why_excluded(r, e, "mean_ttft_ms")]
    request, *busy = _solve(prefilled, names, _prefill_column, "mean_ttft_ms",
                            lambda r, e: ttft_s(step_costs(e, decode), e, r.workload.input_len))
    families = {n: Efficiency(bw_eff=round(1 / (1 + d), 4), compute_eff=round(1 / (1 + c), 4))
                for n, d, c in zip(names, slow, busy)}
    loaded = len(load_rows(corpus))
    return SpeedConstants(round(float(overhead), 6), round(float(request), 6), families,
                          f"fitted on {len(rows)} benchmark rows of the corpus at concurrency 1 (fit rows only; "
                          f"TTFT on the {len(prefilled)} that are real prefills); per-sequence cost and "
                          f"weight-only kernels on the {loaded} fit rows under load",
                          round(per_seq_s, 7), round(weight_only_compute, 3), FITTED_OVERLAP)


# The grid fit_load searches: per-sequence cost per step (seconds) and the weight-only compute factor.
PER_SEQ_GRID = (0.0, 25e-6, 50e-6, 100e-6, 150e-6, 200e-6, 250e-6, 300e-6, 400e-6, 500e-6, 600e-6, 800e-6)
WEIGHT_ONLY_GRID = (1.0, 1.25, 1.5, 2.0, 2.5, 3.0)


def load_rows(corpus: Corpus) -> list:
    """The fit rows run under load (a concurrency above 1, or none and a burst): what ``fit_load`` sees."""
    rows = fit_rows(corpus, [r for r in corpus.speed if not corpus.held_out(r)])
    return [r for r in rows if r.workload.under_load and not outside_scope(r)]


def fit_load(corpus: Corpus, per_seq_grid=PER_SEQ_GRID, weight_only_grid=WEIGHT_ONLY_GRID) -> SpeedConstants:
    """The costs that show only under load, by replaying every fit row under load through the simulated
    engine (``replay.simulated``) for each pair on the grid: the pair with the smallest median
    |log(predicted / measured)| over those rows' TTFT, TPOT and output tok/s, taken separately over the
    rows with and without a weight-only kernel and added (so the factor, which only the quantized rows
    feel, is not outvoted by the rest; medians, so the few rows the planner's KV cache gets wrong cannot
    pull either). The concurrency-1 constants are refitted with the pair."""
    rows = load_rows(corpus)
    quantized = {r.id for r in rows if weight_only(speed_engine(r))}
    best = None
    for per_seq in per_seq_grid:
        for factor in weight_only_grid:
            constants = fit_speed(corpus, per_seq, factor)
            errors: dict[bool, list[float]] = {True: [], False: []}
            for row in rows:
                errors[row.id in quantized] += [abs(math.log(c.predicted / c.measured))
                                                for c in replay_speed(row, constants) if not c.excluded]
            score = sum(statistics.median(e) for e in errors.values() if e)
            if best is None or score < best[0] - 1e-9:
                best = (score, constants)
    return best[1]


def _solve(pairs, names, column, metric: str, known) -> list[float]:
    """Columns: a constant and the row's own family's term; target: the metric less what is already
    known (the datasheet-peak time and earlier fits); weighted by 1/measured (relative error)."""
    a, b, measured = [], [], []
    for row, engine in pairs:
        term = column(row, engine)
        a.append([1.0] + [term if FAMILIES.get(engine.gpu.name) == n else 0.0 for n in names])
        value = row.measured[metric] / 1e3
        b.append(value - known(row, engine))
        measured.append(value)
    x = nonnegative_least_squares(np.array(a), np.array(b), 1 / np.array(measured))
    return [float(v) for v in x]


def _decode_column(row, engine) -> float:
    """Seconds to read the weights and the mean context's KV at the datasheet bandwidth."""
    context = row.workload.input_len + row.workload.output_len / 2
    return (engine.weight_bytes + engine.kv_bytes_per_token * context) / (engine.gpu.bandwidth_gbs * 1e9)


def _prefill_column(row, engine) -> float:
    """Seconds of the prompt's FLOPs (weights and attention) at the datasheet peak."""
    prompt, m = row.workload.input_len, engine.model
    flops = 2 * m.active / engine.tensor_parallel * prompt
    flops += 4 * m.layers * max(1, m.heads // engine.tensor_parallel) * m.head_dim * prompt * prompt / 2
    return flops / (engine.gpu.tflops(engine.fp8) * 1e12)
