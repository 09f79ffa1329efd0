"""The report's "Methodology and limits": what was measured, on what, how — and what
the numbers do not show. Generated from the results themselves (each result
carries its engine facts and provenance), so it cannot drift from what ran.

Pure: runs and the study record in, rows of text out.
"""

from __future__ import annotations

from pathlib import Path

from servelab.reports.compare import load_of
from servelab.results.runs import Run
from servelab.sim.model import OVERLAP

EAGER_NOTE = "--enforce-eager (no CUDA graphs / torch.compile): slower steps than a compiled engine"


def hardware_text(study: dict | None, runs: list[Run]) -> str:
    hw = (study or {}).get("hardware") or (runs[0].servelab.get("study") or {}).get("hardware") or {}
    if not hw:
        host = (runs[0].servelab.get("provenance") or {}).get("host", "?")
        return f"host {host} (no hardware record)"
    gpus = ", ".join(hw.get("gpus") or []) or "none (CPU only)"
    return (f"CPU {hw.get('cpu', '?')} · {hw.get('cores', '?')} logical cores · {hw.get('memory_gib', '?')} GiB RAM · "
            f"GPU: {gpus} · {hw.get('os', '')} · Python {hw.get('python', '?')}")


def engine_rows(configs: dict[str, Run]) -> list[tuple[str, str]]:
    """One row per config: kind, version, model and its hash, dtype, quantization, knobs."""
    return [(name, engine_text(run)) for name, run in configs.items()]


def engine_text(run: Run) -> str:
    e = run.engine
    if not e:
        return f"not recorded (result {run.path.name}); model {run.result.get('model_id')}"
    config, files = e.get("config") or {}, e.get("model_files") or {}
    digest = files.get("sha256")
    model = f"{Path(str(e.get('model', '?'))).name} (sha256 {digest[:16]}… of {len(files.get('files', []))} files)" \
        if digest else f"{e.get('model', '?')} (no local files to hash)"
    knobs = " ".join(e.get("args") or []) or "defaults"
    env = " ".join(f"{k}={v}" for k, v in sorted((e.get("env") or {}).items()))
    return (f"{e.get('kind', '?')} {e.get('version') or 'version ?'} · model {model} · dtype {config.get('dtype', '?')}"
            f" · quantization {config.get('quantization', '?')} · KV dtype {config.get('kv_cache_dtype', '?')}"
            f" · prefix caching {config.get('enable_prefix_caching', '?')} · max_seq_len {config.get('max_seq_len', '?')}"
            f" · knobs: {knobs}" + (f" · env: {env}" if env else ""))


def launch_rows(configs: dict[str, Run]) -> list[tuple[str, str]]:
    """The exact command and environment each engine ran with (the engine log's first line)."""
    return [(name, run.engine["launch"]) for name, run in configs.items() if run.engine.get("launch")]


def workload_rows(workloads: dict[str, Run], repeats: dict[str, int]) -> list[tuple[str, str]]:
    return [(name or "runs", workload_text(run, repeats.get(name, 1))) for name, run in workloads.items()]


def workload_text(run: Run, repeats: int) -> str:
    prov = run.servelab.get("provenance") or {}
    flags, load = prov.get("flags") or {}, load_of(run)
    dataset = load["dataset"] or "?"
    if prov.get("dataset_path"):
        digest = prov.get("dataset_sha256") or "?"
        dataset += f" from {Path(prov['dataset_path']).name} (sha256 {digest[:16]}…)"
    elif dataset in ("random", "prefix_repetition"):
        dataset += " (synthetic token ids drawn with the seed; no file)"
    rate = load["request_rate"]
    shape = "all sent at t0" if str(rate) == "inf" else f"{rate} req/s, burstiness {flags.get('burstiness')}"
    conc = load["max_concurrency"] if load["max_concurrency"] is not None else "uncapped"
    return (f"{dataset} · tokenizer {Path(str(prov.get('tokenizer', '?'))).name} · seed {load['seed']} · "
            f"{load['num_prompts']} prompts, ~{load['input_len']} in / ~{load['output_len']} out tokens · "
            f"arrivals: {shape} · max concurrency {conc} · {repeats} repeat(s) per config · "
            f"backend {flags.get('backend', '?')}")


def limits(runs: list[Run], floor: float) -> list[str]:
    """What the numbers do not show, generated from how they were made."""
    out = []
    first = {r.workload: r for r in reversed(runs)}
    for workload, run in first.items():
        out += _load_limits(workload, run)
    out += _engine_limits(runs)
    out += _noise_limits(runs, floor)
    out += _client_limits(runs)
    out.append("No answer quality was checked: these are speed and memory numbers only.")
    return out


def _load_limits(workload: str, run: Run) -> list[str]:
    flags = (run.servelab.get("provenance") or {}).get("flags") or {}
    load, tag = load_of(run), f"[{workload or 'runs'}] "
    out = []
    if flags.get("dataset_name") == "random" or flags.get("ignore_eos") or flags.get("sharegpt_output_len"):
        out.append(tag + "Output lengths were fixed by the client (ignore_eos / a fixed length): the numbers "
                   "measure generation work, not answer quality or when a model would stop on its own.")
    if load["max_concurrency"] is not None:
        out.append(tag + f"The client capped concurrency at {load['max_concurrency']} requests in flight: the "
                   "engine never saw more; throughput under heavier load is not shown, and latency excludes "
                   "time requests waited for a slot in the client (reported separately as client queue time).")
    if str(load["request_rate"]) == "inf":
        out.append(tag + "Every request was released at t0 (rate inf): a burst, not a steady arrival process.")
    if flags.get("dataset_name") in ("random", "prefix_repetition"):
        out.append(tag + "Prompts are random token ids: real text may tokenize, cache and batch differently.")
    return out


def _engine_limits(runs: list[Run]) -> list[str]:
    out = []
    kinds = {(r.engine.get("config") or {}).get("device_config") for r in runs}
    if "cpu" in kinds or any("cpu" in str(r.engine.get("version", "")) for r in runs):
        out.append("Measured on vLLM's CPU build: absolute numbers say nothing about GPU serving; only the "
                   "direction of differences between configs may carry over, and not always.")
    if any("--enforce-eager" in " ".join(r.engine.get("args") or []) or
           (r.engine.get("config") or {}).get("enforce_eager") == "True" for r in runs):
        out.append("Engines ran with " + EAGER_NOTE + ".")
    resets = {str((r.servelab.get("study") or {}).get("prefix_cache")) for r in runs}
    if resets & {"unsupported", "failed"}:
        out.append("The prefix cache could not be emptied before some runs: later repeats may have been served "
                   "partly from cache.")
    elif "reset" in resets:
        out.append("The engine's prefix cache was emptied before every run (POST /reset_prefix_cache).")
    sim = list(dict.fromkeys(r.config for r in runs if r.simulated))
    if sim:
        out.append(f"SIMULATED: {', '.join(sim)} come from servelab's simulator of vLLM V1's scheduler "
                   f"({_sim_model(next(r for r in runs if r.simulated))}), not a measurement.")
    return out


def _sim_model(run: Run) -> str:
    """The step model and limits a simulated run used, in words (fast mode records them;
    a sim engine's args carry them)."""
    section = run.servelab.get("simulated") or {}
    step = section.get("step_model")
    if step:
        return (f"step model from {step.get('source')}: {step.get('overhead_s', 0) * 1e3:g} ms + "
                f"{step.get('per_seq_s', 0) * 1e3:g} ms/seq + {step.get('per_token_s', 0) * 1e3:g} ms/token, "
                f"floor {step.get('floor_s', 0) * 1e3:g} ms"
                + _read_text(step))
    return "engine args: " + (" ".join(run.engine.get("args") or []) or "defaults")


def _read_text(step: dict) -> str:
    """The weight read, where the step model has one: added to the per-token compute, or overlapping it."""
    if not step.get("read_s"):
        return ""
    overlap = step.get("overlap", OVERLAP)
    how = "added to" if overlap == 1 else f"overlapping (exponent {overlap:g})"
    experts = (f", and {step['expert_read_s'] * 1e3:g} ms per expert its tokens pick ({step['active_experts']} of "
               f"{step['experts']} each, overlapping their {step['expert_token_s'] * 1e3:g} ms a token)"
               if step.get("experts") else "")
    return f", weight read {step['read_s'] * 1e3:g} ms{experts} {how} the per-token compute"


def _noise_limits(runs: list[Run], floor: float) -> list[str]:
    counts: dict[tuple[str, str], int] = {}
    for r in runs:
        counts[(r.workload, r.config)] = counts.get((r.workload, r.config), 0) + 1
    fewest, most = min(counts.values()), max(counts.values())
    repeats = f"{fewest}" if fewest == most else f"{fewest}–{most}"
    starts = {(r.workload, r.config, (r.servelab.get("study") or {}).get("start") or 1) for r in runs}
    fewest_starts = min(sum(1 for w, c, _ in starts if (w, c) == pair) for pair in counts)
    where = ("Each engine started once, so start-to-start variation shows only between configs (compare a "
             "config with its own repeat under another name to see it)." if fewest_starts == 1 else
             f"Each engine was started {fewest_starts} or more times with repeats on every start, so the ranges "
             "include start-to-start variation.")
    return [(f"Noise is estimated from {repeats} repeats per config (the min–max range); "
             f"differences under {floor:.0%} ({2 * floor:.0%} for latencies) are called within noise whatever "
             f"the ranges say. {where}")]


def _client_limits(runs: list[Run]) -> list[str]:
    out = []
    bound = sorted({f"{r.config}/{r.workload}" for r in runs if r.servelab.get("client_bound")})
    if bound:
        out.append(f"The client may have limited these runs (CPU or schedule lag): {', '.join(bound)}.")
    hosts = {str(r.engine.get("base_url", "")) for r in runs}
    if any("127.0.0.1" in h or "localhost" in h for h in hosts):
        out.append("Client and engine shared one machine: they competed for the same cores.")
    return out
