"""A plan as the simulated engine that runs it: its scheduler limits and step model, and
where every number came from.

``servelab serve --engine sim --model M --gpu G`` and ``servelab bench --simulate --model M
--gpu G`` go from a model and an accelerator to a running simulated engine in one step;
``plan --sim-step-model`` writes the same step model to a file. All three take it from
here, so the KV size, the limits and the label cannot drift apart.

The planner's speed model (``planner.speed_model.StepCosts``) and the simulator's step
(``sim.model.StepModel``) carry the weight read as its own term (``read_s``), combined with the
tokens' compute at the same exponent. A telemetry calibration (``planner.speed.StepModel``) adds
the read to every step; for it the read is folded into the simulator's per-step overhead. The simulator's ``source`` is the
provenance in one line — which model config, which GPU datasheet, which step model and
its expected error — because that string travels with every simulated result
(``servelab.simulated.step_model.source``) and is printed on the SIMULATED banner.
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.planner.bands import band_note
from servelab.planner.speed_model import SETUPS
from servelab.planner.plan import Plan, default_batch, quantization, speed_setup
from servelab.planner.speed import StepModel as PlannerStep
from servelab.sim.model import MOE_FIELDS, EngineLimits, StepModel, blocks_for_tokens

# What a roofline at datasheet peak is, until a calibration backs a number (issue 21 item 3
# brings a fitted speed model; docs/planner.md's accuracy table its measured error).
ROOFLINE_ERROR = "roofline at peak: a lower bound of latency, an upper bound of throughput"
DEFAULT_BLOCK = 16  # vLLM's block size on GPUs; the plan's pool says otherwise where it knows


@dataclass(frozen=True, slots=True)
class SimEngine:
    """What the simulated engine runs with, and the provenance beside it."""

    limits: EngineLimits
    model: StepModel
    max_model_len: int
    provenance: dict

    def rows(self) -> list[tuple[str, str]]:
        """The provenance as label/value rows for a console block."""
        p = self.provenance
        return [("model", f"{p['model']} ({p['model_config']})"), ("accelerator", p["gpu"]),
                ("datasheet", p["gpu_datasheet"]), ("weights", p["weights"]),
                ("step model", p["step_model"]), ("step time", self.step_text()),
                ("expected error", p["expected_error"])]

    def step_text(self) -> str:
        m = self.model
        tokens = f"{m.per_token_s * 1e3:.4f} ms per token"
        if m.read_s and m.overlap == 1:
            tokens = f"the weight read {m.read_s * 1e3:.2f} ms + {tokens}"
        elif m.read_s:
            tokens = f"the weight read {m.read_s * 1e3:.2f} ms overlapping {tokens} (exponent {m.overlap:g})"
        if m.experts:
            tokens += (f", and the MoE kernels: {m.expert_read_s * 1e3:.3f} ms per expert the step's tokens pick "
                       f"({m.active_experts} of {m.experts} each) overlapping {m.expert_token_s * 1e3:.4f} ms per token")
        text = f"{m.overhead_s * 1e3:.2f} ms + {m.per_seq_s * 1e3:.3f} ms per sequence + {tokens}"
        return text + (f"; {m.request_s * 1e3:.2f} ms per request before it reaches the engine"
                       if m.request_s else "")


def sim_engine(plan: Plan, model_config: str, calibrated: PlannerStep | None = None,
               calibration_error: str | None = None, replayed: StepModel | None = None) -> SimEngine:
    """The simulated engine for ``plan`` (one that fits: ``planner.fit.require_fit`` first).

    ``model_config``: where the model's shape came from (a config.json path, or the table).
    ``calibrated``: a step model fitted to measured runs' telemetry, replacing the roofline;
    ``replayed``: the simulator's own step model fitted by replaying runs (wins over both);
    ``calibration_error``: what that fit's error was, said beside its numbers."""
    kind = "replay" if replayed else "telemetry" if calibrated else _speed_kind(plan)
    provenance = _provenance(plan, model_config, kind, calibration_error)
    model = StepModel(**_costs(plan, calibrated, replayed), floor_s=0.0, source=source_line(provenance))
    tokens, seqs = default_batch(plan.spec)
    block = plan.pool.block_size if plan.pool else DEFAULT_BLOCK
    limits = EngineLimits(max_num_seqs=seqs, max_num_batched_tokens=tokens,
                          num_blocks=blocks_for_tokens(plan.kv_tokens, block), block_size=block)
    return SimEngine(limits, model, plan.context_tokens, provenance)


def _speed_kind(plan: Plan) -> str | None:
    """"fitted" where the planner's speed model is fitted on published runs for this GPU family."""
    return "fitted" if plan.costs is not None and plan.costs.calibrated else None


def _costs(plan: Plan, calibrated: PlannerStep | None, replayed: StepModel | None) -> dict:
    """The simulator's step costs: a replay fit, else a telemetry fit, else the planner's speed
    model (planner/speed_model.py: fitted on published runs, or the roofline), else its step."""
    if replayed:
        return {"overhead_s": replayed.overhead_s, "per_seq_s": replayed.per_seq_s,
                "per_token_s": replayed.per_token_s, "per_kv_token_s": replayed.per_kv_token_s,
                "per_attention_s": replayed.per_attention_s, "request_s": replayed.request_s,
                "read_s": replayed.read_s, "overlap": replayed.overlap,
                **{name: getattr(replayed, name) for name in MOE_FIELDS}}
    if calibrated is None and plan.costs is not None:
        c = plan.costs
        return {"overhead_s": c.overhead_s, "per_seq_s": c.per_seq_s, "per_token_s": c.per_token_s,
                "per_kv_token_s": c.per_kv_token_s, "per_attention_s": c.attention_flop_s,
                "request_s": c.request_s, "read_s": c.read_s, "overlap": c.overlap,
                **{name: getattr(c, name) for name in MOE_FIELDS}}
    step = calibrated or plan.speed.step
    return {"overhead_s": max(0.0, step.overhead_s + step.weight_read_s), "per_seq_s": step.per_seq_s,
            "per_token_s": step.per_token_s, "per_kv_token_s": 0.0, "per_attention_s": 0.0}


# how each step model is named in the provenance
STEP_NAMES = {None: "planner roofline", "fitted": "planner speed model fitted on published vLLM runs",
              "telemetry": "planner calibration (fitted to measured runs' telemetry)",
              "replay": "calibrated by replaying measured runs through the simulator"}


def _provenance(plan: Plan, model_config: str, kind: str | None, calibration_error: str | None) -> dict:
    spec, gpu = plan.spec, plan.spec.gpu
    fp8 = f", {gpu.fp8_tflops:g} fp8" if gpu.fp8_tflops else ""
    datasheet = f"{gpu.bandwidth_gbs:g} GB/s, {gpu.bf16_tflops:g} bf16{fp8} TFLOPS (planner/gpus.py)"
    if gpu.name == "cpu":
        datasheet = f"{gpu.bandwidth_gbs:g} GB/s, {gpu.bf16_tflops:g} TFLOPS: rough figures for 2 server cores"
    return {"model": spec.model.name, "model_config": model_config,
            "gpu": f"{gpu.name} x{spec.gpu_count}", "gpu_datasheet": datasheet,
            "weights": _weights(spec),
            "step_model": STEP_NAMES[kind],
            "expected_error": _expected_error(kind, calibration_error, plan)}


def _expected_error(kind: str | None, calibration_error: str | None, plan: Plan) -> str:
    if kind == "fitted":
        setup = speed_setup(plan.spec)
        if setup:
            return (f"TPOT{band_note('mean_tpot_ms', setup) or ' unknown'}: {SETUPS[setup]} "
                    "(docs/planner_accuracy.md)")
        return f"TPOT{band_note('mean_tpot_ms') or ' unknown'} on held-out published runs (docs/planner_accuracy.md)"
    return (calibration_error or "as fitted") if kind else ROOFLINE_ERROR


def _weights(spec) -> str:
    weights = quantization(spec)  # the planner knows the bytes per weight, not bf16 from fp16
    return f"{spec.model.dtype_bytes * 8}-bit (not quantized)" if weights == "none" else weights


def source_line(p: dict) -> str:
    """The provenance in one line (the simulator's ``StepModel.source``)."""
    return (f"{p['step_model']}: {p['model']} ({p['model_config']}) on {p['gpu']} ({p['gpu_datasheet']}), "
            f"weights {p['weights']}; expected error: {p['expected_error']}")
