"""Plan before you launch: memory and speed of a model × accelerator × settings, without them.

    from servelab.planner import PlanSpec, make_plan, find_model, find_gpu
    plan = make_plan(PlanSpec(model=find_model("Qwen3-14B"), gpu=find_gpu("H100")))
    plan.kv_tokens, plan.max_concurrency, plan.speed.tpot_batch1_s

Pure arithmetic (layer L3); the only I/O is ``planner.files``, which reads a local
config.json or a GGUF header, and ``calibrate.load_runs``, which reads measured runs
through their owners' readers (telemetry.timeline, results.runs). ``fit`` says why a
plan does not fit and what would. Every formula and its source in vLLM: docs/planner.md.
"""

from servelab.planner.gpus import GPUS, Gpu, find_gpu
from servelab.planner.models import MODELS, ModelShape, find_model
from servelab.planner.plan import Plan, PlanSpec, make_plan
from servelab.planner.speed import SpeedFloor, StepModel

__all__ = ["GPUS", "MODELS", "Gpu", "ModelShape", "Plan", "PlanSpec", "SpeedFloor", "StepModel",
           "find_gpu", "find_model", "make_plan"]
