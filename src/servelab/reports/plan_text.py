"""What ``servelab plan`` prints: the plan as text (the memory report predicted, the speed
rows with their error bands, the floor and the answer), the calibration and replay
sections, and the bundled model and GPU tables.

Text only, from a made plan (``planner.make_plan``) and the calibrations
(``planner.calibrate``): kept out of ``cli/plan.py`` so the command stays parse, call,
print, and so a planner test reads the same text without importing the CLI. The JSON
form (``plan_json``) stays with the command.
"""

from __future__ import annotations

from servelab.planner.budget import GIB


def format_calibration(fitted, plan, asked_max_model_len: int | None) -> str:
    from servelab.reports.rows import aligned

    m = fitted.model
    held = "-" if fitted.held_out_error is None else f"{pct(fitted.held_out_error)} on {fitted.held_out}"
    rows = [("step model", f"{m.overhead_s * 1e3:.2f} ms + {m.per_seq_s * 1e3:.3f} ms per sequence + "
                           f"{m.per_token_s * 1e3:.3f} ms per token + weight read {m.weight_read_s * 1e3:.2f} ms"),
            ("fit error", f"{pct(fitted.fit_error)} over {fitted.intervals} loaded intervals, "
                          f"{len(fitted.runs)} run(s)"),
            ("held-out error", held)]
    rows += [(f"TPOT at batch {t.batch}", f"{t.seconds * 1e3:.2f} ms ({t.how})") for t in fitted.tpot]
    notes = [fitted.note()]
    if m.overhead_s < 0:  # the fitted per-step time is below the roofline's weight read
        notes.append("the per-step time fitted is below weights ÷ bandwidth: the bandwidth figure "
                     "is too low for this machine (pass --gpu-bandwidth-gbs)")
    if asked_max_model_len is None and plan.spec.max_model_len is not None:
        notes.append(f"the plan above is for the runs' max-model-len, {plan.spec.max_model_len:,} "
                     "(pass --max-model-len for another)")
    return ("\n\ncalibrated step time (from measured runs)\n" + aligned(rows)
            + "".join(f"\nnote: {note}" for note in notes if note))


def format_replay(replayed) -> str:
    """The replay calibration: its step model, and each point measured (its repeats' range) beside
    its replay, with the error against that range; held-out points last, extrapolations noted."""
    from servelab.planner.replay import METRICS

    m = replayed.model
    head = (f"\n\ncalibrated simulator (measured runs replayed; SIMULATED predictions, error against the "
            f"repeats' range)\n  step model  {m.overhead_s * 1e3:.2f} ms + {m.per_seq_s * 1e3:.3f} ms per sequence + "
            f"{m.per_token_s * 1e3:.4f} ms per token\n\n")
    rows = ["| point | runs | used for | " + " | ".join(f"{label}: measured (range) / simulated / error"
                                                      for _, label in METRICS) + " |",
            "|---|---|---|" + "---|" * len(METRICS)]
    for used, group in (("fit", replayed.fitted), ("**held out**", replayed.held_out)):
        for p in group:
            cells = [_replay_cell(replayed, p, key) for key, _ in METRICS]
            rows.append(f"| {p.point} | {len(p.runs)} | {used} | " + " | ".join(cells) + " |")
    notes = [f"\nnote: {line}" for line in replayed.warnings()]
    return head + "\n".join(rows) + worst_line(replayed) + "".join(notes)


def _replay_cell(replayed, point, key: str) -> str:
    values = point.values(key)
    spread = f"{min(values):.1f}–{max(values):.1f}" if len(values) > 1 else "one run"
    return (f"{point.mean(key):.1f} ({spread}) / {replayed.predicted[point.point][key]:.1f} / "
            f"{pct(replayed.error(point, key))}")


def worst_line(replayed) -> str:
    """The held-out points' worst error per metric (against their range), in one line."""
    from servelab.planner.replay import METRICS

    if not replayed.held_out:
        return "\nnote: no --hold-out runs: the errors above are on the runs fitted"
    worst = [f"{label} {pct(max((replayed.error(p, key) for p in replayed.held_out), key=abs))}"
             for key, label in METRICS]
    return "\nheld out, worst error against the repeats' range: " + ", ".join(worst)


def pct(fraction: float) -> str:
    return f"{round(fraction, 3) + 0.0:+.1%}"  # + 0.0: a float error of -1e-16 prints +0.0%, not -0.0%


def format_plan(plan) -> str:
    from servelab.planner.plan import speed_setup
    from servelab.planner.speed_model import SETUPS
    from servelab.reports.rows import aligned, memory_rows

    rows = [row for row in memory_rows(plan.report()) if row[0] != "load time"]
    rows += [("KV per token", _bytes(plan.kv_bytes_per_token)), ("other memory", _other(plan))]
    rows = [(label, value + memory_band(plan, label)) for label, value in rows] + budget_row(plan)
    setup = speed_setup(plan.spec)
    expected, floor = expected_rows(plan, setup), speed_rows(plan.speed)
    width = max(len(label) for label, _ in rows + floor + expected)
    lines = [f"plan: {describe(plan)}", *assumes(plan), "", "memory report (predicted)", aligned(rows, width)]
    if expected:
        lines += ["", f"speed (predicted; {plan.costs.source})", aligned(expected, width)]
        if setup:
            lines.append(f"  beyond the fit: {SETUPS[setup]}; the numbers carry the error of the published runs "
                         "of such a setup (docs/planner_accuracy.md)")
    lines += ["", "speed floor (roofline: a lower bound of latency, an upper bound of throughput)",
              aligned(floor, width), "", answer(plan)]
    return "\n".join(lines + [f"note: {note}" for note in plan.notes])


# memory report row -> the corpus metric whose error band it carries (planner/bands.py)
MEMORY_BANDS = {"weights": "weights_gib", "KV cache": "kv_gib", "KV cache tokens": "kv_gib",
                "other memory": "other_gib"}


def memory_band(plan, label: str) -> str:
    """Beside a GPU plan's number, the error the corpus measured for it; on vLLM's CPU build the
    KV pool is exact (VLLM_CPU_KVCACHE_SPACE), so nothing is added there."""
    from servelab.planner.bands import band_note

    if plan.other is None or label not in MEMORY_BANDS:
        return ""
    return band_note(MEMORY_BANDS[label])


def expected_rows(plan, setup: str | None) -> list[tuple[str, str]]:
    """The speed model's numbers for one request alone (1,024-token prompt, 128 out), with their
    bands; none where no published run calibrates this GPU family (the roofline below is all).
    ``setup``: which of ``speed_model.SETUPS`` the plan is (``plan.speed_setup``), or None."""
    from servelab.planner.bands import ALONE, band_note
    from servelab.planner.speed_model import Engine, concurrency1, tpot_s

    costs = plan.costs
    if costs is None or not costs.calibrated:
        return []
    engine = Engine(plan.spec.model, plan.spec.gpu, 0.0, 0.0, max_num_batched_tokens=_batch_tokens(plan))
    one = concurrency1(costs, engine, 1024, 128)
    # the bands of published runs at concurrency 1 alone, as these numbers are (a setup the step
    # model has no term for: the band of the published runs of that setup, whatever their load, and
    # which way they missed)
    return [("TPOT, 1 request", f"{tpot_s(costs, 1024, 128) * 1000:.2f} ms{band_note('mean_tpot_ms' + ALONE, setup)}"),
            ("TTFT, 1k prompt", f"{one['mean_ttft_ms']:.1f} ms{band_note('mean_ttft_ms' + ALONE, setup)}"),
            ("tok/s, 1 request",
             f"{one['output_tok_s']:.1f} (1k in, 128 out){band_note('output_tok_s' + ALONE, setup)}")]


def _batch_tokens(plan) -> int:
    from servelab.planner.plan import default_batch

    return default_batch(plan.spec)[0]


def describe(plan) -> str:
    from servelab.planner.plan import quantization, tensor_parallel

    spec = plan.spec
    weights = quantization(spec)
    if weights == "none":  # the planner knows the bytes per weight, not bf16 from fp16
        weights = f"{spec.model.dtype_bytes * 8}-bit (not quantized)"
    return (f"{spec.model.name} on {spec.gpu.name} x{spec.gpu_count} ({spec.gpu.memory_gib:.1f} GiB each), "
            f"{spec.engine}, weights {weights}, KV {spec.kv_cache_dtype}, TP {tensor_parallel(spec)}")


def assumes(plan) -> list[str]:
    """The header line naming the vLLM release whose defaults the plan takes and the memory share
    it used (a plan left at its defaults is right only for that release: planner/vllm_defaults.py)."""
    from servelab.planner.vllm_defaults import vllm_defaults

    spec = plan.spec
    if spec.engine != "vllm":
        return []
    release = vllm_defaults(spec.vllm_version)
    if spec.gpu.name == "cpu":
        return [f"assumes: vLLM {release.version}'s defaults (--vllm-version); the CPU build's KV cache is "
                f"VLLM_CPU_KVCACHE_SPACE={spec.cpu_kv_space_gib} GiB"]
    given = "its default" if spec.gpu_memory_utilization == release.gpu_memory_utilization else "given"
    return [f"assumes: vLLM {release.version}'s defaults (--vllm-version); --gpu-memory-utilization "
            f"{spec.gpu_memory_utilization:g} ({given})"]


def budget_row(plan) -> list[tuple[str, str]]:
    """What vLLM may use of one GPU at the plan's utilization, and the rows above that fill it:
    weights + KV cache + other memory = ceil(memory x utilization) (planner/budget.py)."""
    from servelab.planner.budget import requested_bytes

    if plan.other is None:
        return []
    spec = plan.spec
    total = int(spec.gpu.memory_gib * GIB)
    share = requested_bytes(total, spec.gpu_memory_utilization)
    return [("vLLM's share", f"{share / GIB:.2f} GiB = {total / GIB:.2f} GiB x {spec.gpu_memory_utilization:g} "
                             "per GPU: weights + KV cache + other memory")]


def speed_rows(speed) -> list[tuple[str, str]]:
    batch = "-" if speed.compute_bound_batch is None else f"{speed.compute_bound_batch:,.0f} sequences"
    prefill = "-" if speed.prefill_per_1k_s is None else f"{speed.prefill_per_1k_s * 1000:.1f} ms"
    return [("TPOT at batch 1", f"{speed.tpot_batch1_s * 1000:.2f} ms (weights / peak bandwidth)"),
            ("compute-bound from", batch), ("prefill per 1k tok", prefill)]


def answer(plan) -> str:
    """A plan that does not fit never gets here (``planner.fit.require_fit``)."""
    count = plan.requests_at_once
    return f"fits: {count:,} request{'' if count == 1 else 's'} of {plan.context_tokens:,} tokens at once"


def _other(plan) -> str:
    if plan.other is None:
        return "-"
    o = plan.other
    return (f"{o.total / GIB:.2f} GiB (activations {o.activations / GIB:.2f}, non-torch {o.non_torch / GIB:.2f}, "
            f"CUDA graphs {o.cuda_graphs / GIB:.2f}; modelled)")


def _bytes(value) -> str:
    value = float(value)
    return f"{value / 1024:,.2f} KiB" if value >= 1024 else f"{value:,.0f} B"


def list_models() -> str:
    from servelab.planner import MODELS

    lines = [f"{'model':<44} {'params':>9} {'layers':>6} {'kv heads':>8} {'head dim':>8}"]
    for m in MODELS.values():
        lines.append(f"{m.name:<44} {m.total_params / 1e9:>8.2f}B {m.layers:>6} {m.kv_heads:>8} {m.head_dim:>8}")
    return "\n".join(lines)


def list_gpus() -> str:
    from servelab.planner import GPUS

    lines = [f"{'gpu':<10} {'GiB':>7} {'GB/s':>6} {'bf16 TF':>8} {'fp8 TF':>7}"]
    for g in GPUS.values():
        memory = "machine" if g.memory_gib is None else f"{g.memory_gib:.1f}"
        lines.append(f"{g.name:<10} {memory:>7} {g.bandwidth_gbs:>6g} {g.bf16_tflops:>8g} {g.fp8_tflops or '-':>7}")
    return "\n".join(lines)
