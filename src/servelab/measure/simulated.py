"""``servelab bench --simulate``: the run happens in the simulated engine, and everything
after it — metrics, console block, result JSON, timeline, diagnosis — is the path a
measured run takes. What differs is said in the result (``servelab.simulated``), on the
console (a SIMULATED line) and in the engine section (kind ``sim``, its vLLM-named args,
its KV size), so nothing downstream can take it for a measurement.
"""

from __future__ import annotations

from servelab.config import OutputSpec
from servelab.datasets.agentic import Sessions
from servelab.datasets.sample import Sample
from servelab.loadgen.values import BenchConfig, BenchRun
from servelab.loadgen.sessions import Agentic
from servelab.loadgen.sim_drive import run_simulated
from servelab.loadgen.sim_sessions import run_simulated_sessions
from servelab.records import RecordSink
from servelab.sim.model import DEFAULT_OUTPUT_LEN, EngineLimits, StepModel
from servelab.sim.options import engine_from_flags, to_argv
from servelab.sim.simulate import SimResult
from servelab.telemetry import sim_timeline
from servelab.telemetry.timeline import Timeline

MODEL_NAME = "sim"  # the served name when --model is not given


def run(limits: EngineLimits, model: StepModel, out: OutputSpec, config: BenchConfig, sample: Sample,
        sink: RecordSink) -> tuple[BenchRun, Timeline, dict]:
    """The run (its records into ``sink``), its timeline, and the result sections that label it."""
    bench_run, sim, records = run_simulated(config, sample.requests, limits, model, sink, sample.arrival_state)
    timeline = None if not out.telemetry else sim_timeline.build(
        sim.steps, records, bench_run.outcome.t0_ns, bench_run.outcome.end_ns, out.telemetry_interval_s, limits)
    return bench_run, timeline, sections(limits, model, sim, mode="fast")


def run_sessions(limits: EngineLimits, model: StepModel, out: OutputSpec, config: BenchConfig, work: Sessions,
                 sink: RecordSink) -> tuple[BenchRun, Timeline, dict, Agentic]:
    """``run`` for agentic sessions (loadgen/sim_sessions.py), and what the sessions did."""
    bench_run, sim, records, agentic = run_simulated_sessions(config, work, limits, model, sink)
    timeline = None if not out.telemetry else sim_timeline.build(
        sim.steps, records, bench_run.outcome.t0_ns, bench_run.outcome.end_ns, out.telemetry_interval_s, limits)
    return bench_run, timeline, sections(limits, model, sim, mode="fast"), agentic


def card(name: str) -> dict:
    """The fast mode's /v1/models answer, as its provenance gives it: no server was asked."""
    return {"object": "list", "data": [{"id": name, "owned_by": "servelab-sim"}]}


def sections(limits: EngineLimits, model: StepModel, sim: SimResult | None, mode: str) -> dict:
    """``simulated``: what produced the numbers; ``engine``: what diagnosis reads."""
    simulated = {"mode": mode, "engine": "vLLM V1 scheduler model (servelab.sim)",
                 "limits": limits.to_dict(), "step_model": model.to_dict(),
                 "default_output_len": DEFAULT_OUTPUT_LEN,
                 "prefix_cache_ids": "4-character pieces of the prompt text (servelab.sim.prompt)"}
    if sim is not None:
        c = sim.counters
        simulated["counters"] = {"steps": c.steps, "preemptions": c.preemptions,
                                 "prefix_cache_queries": c.prefix_queries, "prefix_cache_hits": c.prefix_hits}
    engine = {"kind": "sim", "args": to_argv(limits, model),
              "memory_report": {"kv_cache_tokens": limits.kv_tokens, "source": "simulated"}}
    return {"simulated": simulated, "engine": engine}


def detected(server_models: dict | None, engine: dict | None = None) -> dict:
    """A bench against a running ``sim`` server: its /v1/models says SIMULATED. When the
    caller started it (a study), its args give the limits and step model it ran with."""
    cards = (server_models or {}).get("data") or []
    if not any("SIMULATED" in str(c.get("owned_by", "")) for c in cards if isinstance(c, dict)):
        return {}
    section = {"mode": "real-time", "engine": "vLLM V1 scheduler model (servelab.sim)",
               "detected_from": "the server's /v1/models owned_by"}
    if (engine or {}).get("kind") == "sim":
        limits, model = engine_from_flags(flags=engine.get("args") or [], known_only=True)
        section = {**sections(limits, model, None, "real-time")["simulated"], **section}
    return {"simulated": section}


def banner(section: dict) -> str:
    if "limits" not in section:
        return ("SIMULATED: the server is servelab's simulated engine (real-time mode); "
                "its timing comes from a vLLM V1 scheduler model, not a model running")
    limits, step = section["limits"], section["step_model"]
    return (f"SIMULATED: no engine ran; servelab's vLLM V1 scheduler model ({section['mode']} mode) · "
            f"max_num_seqs {limits['max_num_seqs']}, max_num_batched_tokens {limits['max_num_batched_tokens']}, "
            f"KV {limits['kv_tokens']} tokens · step model from {step['source']}")
