"""Rules that read the GPU's own counters (NVML): a GPU idling under load, and one bound by
memory bandwidth. Thresholds beside each; the CPU-side and scheduler rules are in rules.py.

A hot GPU is not bandwidth-bound while a cap pins the batch (``pinned.pinned``): at batch 2
every decode step re-reads the weights, and a larger batch spreads that read over more
tokens — the cap is the first limit, as for a CPU engine's busy cores (host.py)."""

from __future__ import annotations

from servelab.diagnose import changes
from servelab.diagnose.evidence import Evidence
from servelab.diagnose.pinned import pinned
from servelab.diagnose.rules import mean, more_load, rounded
from servelab.diagnose.verdict import Verdict

GPU_UTIL_LOW = 50.0  # % busy under load
GPU_UTIL_HIGH = 80.0
GPU_POWER_HIGH = 0.70  # of the enforced power limit
GPU_MEM_BUSY = 40.0  # % of time the memory controller was busy


def gpu_underutilized(ev: Evidence) -> Verdict | None:
    gpus = [g for g in ev.gpus if g.util]
    if not gpus:
        return None
    util = mean([mean(g.util) for g in gpus])
    if util >= GPU_UTIL_LOW:
        return None
    running = f" with {mean(ev.engine.running):.1f} requests running" if ev.engine else ""
    return Verdict("gpu-underutilized", 0.7 if util < GPU_UTIL_LOW / 2 else 0.55,
                   f"The GPU idles under load: utilization {util:.0f}% on average while requests were in "
                   f"flight{running}.",
                   {"gpu_util_mean": rounded(util, 1), "gpus": [g.index for g in gpus]},
                   f"Batch more: {more_load(ev)}, and the engine's --max-num-seqs; a model this small for the GPU "
                   "may serve better as several replicas.")


# Peak memory bandwidth (TB/s) by NVML device name, most specific first: datasheet figures.
# First match wins: a name that contains another's ("GH200" ⊃ "H200" ⊃ "H20") comes before it.
PEAK_TBS = (("GH200", 4.0), ("H200", 4.8), ("H100 NVL", 3.9), ("H100 PCIe", 2.0), ("H100", 3.35), ("H20", 4.0),
            ("B200", 8.0), ("A100-SXM4-80GB", 2.039), ("A100 80GB PCIe", 1.935),
            ("A100", 1.555), ("L40S", 0.864), ("L40", 0.864), ("A10G", 0.6), ("A10", 0.6), ("L4", 0.3),
            ("RTX 4090", 1.008), ("T4", 0.32))
BANDWIDTH_SHARE = 0.4  # weights re-read at ≥ 40 % of peak: decode is bound by memory


def peak_tbs(name: str | None) -> float | None:
    return next((tbs for key, tbs in PEAK_TBS if name and key in name), None)


def weight_read_share(ev: Evidence, g) -> float | None:
    """Weights read per second ÷ the GPU's peak bandwidth. Each decode step reads every
    weight once: steps/s = output tok/s ÷ mean running requests; bytes/s ≥ steps/s ×
    weight bytes (a lower bound: KV reads come on top). None where a part is unknown."""
    peak, f = peak_tbs(g.name), ev.facts
    running = mean(ev.engine.running) if ev.engine and ev.engine.running else None
    if not (peak and f.weights_gib and f.output_throughput and running and running >= 1):
        return None
    per_gpu = f.weights_gib / (f.tensor_parallel or 1)  # tensor parallel: each GPU holds its shard
    return f.output_throughput / running * per_gpu * 2**30 / (peak * 1e12)


def memory_bandwidth_bound(ev: Evidence) -> Verdict | None:
    hot = [g for g in ev.gpus if g.util and g.power_w and _hot(g)]
    if not hot or pinned(ev):
        return None  # a batch pinned at a cap: the cap, not the bytes per token, is the first limit
    g = hot[0]
    power, tok_s = mean(g.power_w), ev.facts.output_throughput
    share = weight_read_share(ev, g)
    if share is not None and share < BANDWIDTH_SHARE:
        return None  # hot, but its throughput reads memory well below peak: not the bandwidth
    per_w = f", {tok_s / power:.2f} output tok/s per W" if tok_s else ""
    reads = (f" Reading the weights once per decode step takes at least {share:.0%} of its "
             f"{peak_tbs(g.name):g} TB/s." if share is not None else
             " NVML sees neither bytes/s nor FLOPs, and the weights' size or this GPU's peak bandwidth is not "
             "known here: this is inferred from power and memory activity alone.")
    return Verdict(
        "memory-bandwidth-bound", 0.75 if share is not None else 0.5,
        f"GPU {g.index} is busy and hot: utilization {mean(g.util):.0f}%, memory controller busy "
        f"{mean(g.mem_util):.0f}%, power {power:.0f} W of {g.power_limit_w:.0f} W{per_w}.{reads}",
        {"gpu": g.index, "util_mean": rounded(mean(g.util), 1), "mem_util_mean": rounded(mean(g.mem_util), 1),
         "power_w_mean": rounded(power, 1), "power_limit_w": g.power_limit_w, "output_tok_s": rounded(tok_s, 1),
         "weight_read_share": rounded(share, 3) if share is not None else None},
        changes.says("vllm", "memory-bandwidth-bound"))


def _hot(g) -> bool:
    return (mean(g.util) >= GPU_UTIL_HIGH and g.power_limit_w is not None
            and mean(g.power_w) >= GPU_POWER_HIGH * g.power_limit_w and mean(g.mem_util) >= GPU_MEM_BUSY)


GPU_RULES = (memory_bandwidth_bound, gpu_underutilized)
