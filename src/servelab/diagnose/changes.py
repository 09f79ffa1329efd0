"""Knobs as data: for each engine kind, from a diagnosis verdict to the changes worth trying.

One table serves two readers. The diagnosis rules (``rules.py``) take their next-step
sentences from it (``says``), and ``servelab optimize`` tries its ``changes`` in order —
so the advice a person reads and the experiment the optimizer runs are the same one.
``tests/diagnose/test_changes.py`` fails when a sentence names a flag that is not a
change, or a change that the sentence does not name.

A verdict key is the verdict's id, and for ``scheduler-cap`` also which limit held
(its evidence's ``limit``: ``max_num_seqs``, ``max_num_batched_tokens``, ``plateau``,
``unknown``, ``slots``), since raising the count does nothing to a token budget.

Each change says how to move its value (``step``: double it, add a fixed amount, set a
value) and when to stop (``ceiling``: the last value worth a run; and, always, the
first candidate that is not better beyond noise — a doubling that bought nothing says
the next doubling will not either). Values the engine ran with come from the verdict's
evidence (``evidence_key``), else the flag as given, else ``default`` (the engine's own
default, cited beside it).
"""

from __future__ import annotations

from dataclasses import dataclass

FLAG, ENV, CLIENT, MODEL = "flag", "env", "client", "model"


@dataclass(frozen=True, slots=True)
class Change:
    kind: str  # FLAG (engine flag), ENV (engine environment), CLIENT (the load generator's setting), MODEL
    name: str  # "--max-num-seqs", "VLLM_CPU_KVCACHE_SPACE", "max_concurrency", "workers", "model"
    step: str  # "double" | "plus:X" | "set:VALUE" | "given" (MODEL: the values are the user's, none by default)
    ceiling: float | None = None  # no value past this is tried
    default: str | None = None  # the engine's value when the flag is not given
    evidence_key: str | None = None  # where the verdict's evidence states the value the engine ran with
    also: tuple[str, ...] = ()  # flags doubled together with it (llama.cpp: --ctx-size with --parallel)
    mention: str | None = None  # how the next-step sentence names it, when not by ``name``
    # it can change what the model answers (a dtype, a quantized or other checkpoint): optimize keeps
    # it only when its answers stay within the reference's own variation (optimize/quality_check.py)
    alters_outputs: bool = False

    @property
    def said_as(self) -> str:
        return self.mention or (f"--{self.name.replace('_', '-')}" if self.kind == CLIENT else self.name)


@dataclass(frozen=True, slots=True)
class Remedy:
    changes: tuple[Change, ...]
    says: str = ""  # the diagnosis's next-step sentence (a format string), where rules.py writes it


# vLLM 0.32's defaults when the flag is not given (EngineArgs.get_batch_defaults, the API server): 256
# sequences on a GPU under 70 GiB, 128 on the CPU build; the token budget 2048 on both. A larger GPU's
# (1024 / 8192) come from the GPU the engine serves from (optimize/config.engine_defaults).
SEQS = Change(FLAG, "--max-num-seqs", "double", 1024, "256", "max_num_seqs")
SEQS_CPU = Change(FLAG, "--max-num-seqs", "double", 1024, "128", "max_num_seqs")
BATCHED = Change(FLAG, "--max-num-batched-tokens", "double", 65536, "2048", "max_num_batched_tokens")
CONCURRENCY = Change(CLIENT, "max_concurrency", "double", 4096, None, "max_concurrency")
CONCURRENCY_SEQS = Change(CLIENT, "max_concurrency", "double", 4096, None, "max_concurrency",
                          also=("--max-num-seqs",))
WORKERS = Change(CLIENT, "workers", "double", 16, "1", None, mention="--workers")
KV_FP8 = Change(FLAG, "--kv-cache-dtype", "set:fp8", None, "auto", alters_outputs=True)
GPU_UTIL = Change(FLAG, "--gpu-memory-utilization", "plus:0.04", 0.96, "0.9")
CPU_KV = Change(ENV, "VLLM_CPU_KVCACHE_SPACE", "double", 64, "1")  # GiB; engines/vllm.py sets 1 for the CPU build
SIM_KV = Change(FLAG, "--kv-cache-tokens", "double", 1 << 22, "65536", "kv_cache_tokens")
# A checkpoint the user names (``optimize --alternative-model``): smaller weights free memory for the
# KV cache and bytes read per decode step. No value of its own: only offered when the user gave one.
ALT_MODEL = Change(MODEL, "model", "given", mention="--alternative-model", alters_outputs=True)
PARALLEL = Change(FLAG, "--parallel", "double", 64, "1", "slots", also=("--ctx-size",))

SAYS_SEQS = ("Raise --max-num-seqs from {s} (e.g. to {s2}, {s4}) and re-run the same load; watch KV usage and "
             "preemptions as it rises. If that buys nothing, the token budget holds the queue too: raise "
             "--max-num-batched-tokens.")
SAYS_BATCHED = ("Raise --max-num-batched-tokens from {b} (e.g. to {b2}) and re-run the same load; each step then "
                "admits more prompt tokens (and takes longer: watch TPOT).")
SAYS_UNKNOWN = ("Re-run diagnose with --max-num-batched-tokens N (the engine's value) to confirm, then raise it on "
                "the engine and re-run the same load.")
SAYS_PLATEAU = ("If the engine runs with --max-num-seqs {p}, raise it (e.g. to {p2}); otherwise raise "
                "--max-num-batched-tokens. Re-run the same load.")
SAYS_SLOTS = ("Raise --parallel from {s} (e.g. to {s2}) and --ctx-size with it, since the slots share the "
              "context. Re-run the same load.")
SAYS_SLOTS_PLATEAU = ("llama.cpp runs at most --parallel requests at once (its slots): if that is {p}, raise it "
                      "(e.g. to {p2}) and --ctx-size with it, since the slots share the context. Re-run the same "
                      "load.")
SAYS_CONCURRENCY = ("Raise the client's --max-concurrency (e.g. {c} → {c2}, {c4}) under the same load; engine "
                    "knobs will not move this.")
SAYS_CONCURRENCY_SEQS = ("Raise the client's --max-concurrency (e.g. {c} → {c2}) and the engine's --max-num-seqs "
                         "with it (it is {s} too): raising one alone moves the queue to the other. Re-run the same "
                         "load.")
SAYS_CONCURRENCY_CPU = ("Raise --max-concurrency (e.g. {c} → {c2}) only to batch more on the same full cores: "
                        "throughput rises as far as larger batches use them better, and no further.")
SAYS_CLIENT = ("Split the load across client processes — re-run with `--workers N` (one core each, one "
               "schedule), or give the client its own cores (taskset) — and compare; if throughput rises, "
               "this run measured the client.")
SAYS_KV_GPU = ("Make room in the KV cache{now}: quantize the KV cache (--kv-cache-dtype fp8) or raise "
               "--gpu-memory-utilization, or serve quantized weights (AWQ/FP8: `servelab optimize --alternative-model M` "
               "tries a checkpoint you name); re-run the same load.")
SAYS_KV_CPU = ("Make room in the KV cache{now}: raise VLLM_CPU_KVCACHE_SPACE (GiB, the CPU build's KV budget) "
               "if the machine's memory allows, or serve a smaller checkpoint (`servelab optimize "
               "--alternative-model M` tries one you name); re-run the same load.")
SAYS_KV_SIM = ("Make room in the KV cache{now}: raise --kv-cache-tokens (the simulated cache), or give the "
               "simulated engine another model's step costs (`servelab optimize --alternative-model FILE`, a "
               "step-model file); re-run the same load.")
SAYS_BANDWIDTH = ("Cut the bytes read per token: quantize the weights (AWQ/FP8: `servelab optimize "
                  "--alternative-model M` tries a checkpoint you name) or the KV cache (--kv-cache-dtype fp8); a "
                  "larger batch spreads each weight read over more tokens, if latency allows.")
SAYS_KV_LLAMACPP = ("Make room in the KV cache{now}: raise --ctx-size (the slots share it); re-run the same load.")

_CLIENT_SIDE = {
    "client-concurrency-cap": Remedy((CONCURRENCY,), SAYS_CONCURRENCY),
    "client-concurrency-cap:cpu": Remedy((CONCURRENCY,), SAYS_CONCURRENCY_CPU),
    "client-bound": Remedy((WORKERS,), SAYS_CLIENT),
}


def _vllm(kv: Remedy, seqs: Change = SEQS) -> dict[str, Remedy]:
    return {
        "client-concurrency-cap:seqs": Remedy((CONCURRENCY_SEQS,), SAYS_CONCURRENCY_SEQS),
        "scheduler-cap:max_num_seqs": Remedy((seqs, BATCHED), SAYS_SEQS),
        "scheduler-cap:max_num_batched_tokens": Remedy((BATCHED,), SAYS_BATCHED),
        "scheduler-cap:unknown": Remedy((BATCHED,), SAYS_UNKNOWN),
        "scheduler-cap:plateau": Remedy((seqs, BATCHED), SAYS_PLATEAU),
        "kv-capacity": kv,
        "prefix-cache-eviction": kv,  # room in the cache keeps the blocks a session reuses
        "gpu-underutilized": Remedy((CONCURRENCY, seqs)),
        **_CLIENT_SIDE,
    }


CTX = Change(FLAG, "--ctx-size", "double", 1 << 20, "4096")

TABLE: dict[str, dict[str, Remedy]] = {
    "vllm": {**_vllm(Remedy((KV_FP8, GPU_UTIL, ALT_MODEL), SAYS_KV_GPU)),
             "memory-bandwidth-bound": Remedy((KV_FP8, ALT_MODEL), SAYS_BANDWIDTH)},
    "vllm-cpu": _vllm(Remedy((CPU_KV, ALT_MODEL), SAYS_KV_CPU), SEQS_CPU),
    # the sim's "model" is its step costs: a --step-model file stands in for a checkpoint (optimize/config.py)
    "sim": _vllm(Remedy((SIM_KV, ALT_MODEL), SAYS_KV_SIM)),
    "llamacpp": {
        "scheduler-cap:slots": Remedy((PARALLEL,), SAYS_SLOTS),
        "scheduler-cap:plateau": Remedy((PARALLEL,), SAYS_SLOTS_PLATEAU),
        "kv-capacity": Remedy((CTX,), SAYS_KV_LLAMACPP),
        **_CLIENT_SIDE,
    },
    # a server servelab cannot restart: the client's side only
    "external": dict(_CLIENT_SIDE),
}
# A command engine takes vLLM's flags where its user says they exist (``optimize --knobs``).
TABLE["command"] = TABLE["vllm"]


def key_of(verdict: str, evidence: dict, cpu_full: bool = False) -> str:
    """The table's key for a verdict: scheduler-cap by which limit held; the client's cap
    beside full CPUs has its own (smaller) promise."""
    if verdict == "scheduler-cap":
        return f"scheduler-cap:{evidence.get('limit', 'max_num_seqs')}"
    if verdict == "client-concurrency-cap" and cpu_full:
        return "client-concurrency-cap:cpu"
    seqs, cap = evidence.get("max_num_seqs"), evidence.get("max_concurrency")
    if verdict == "client-concurrency-cap" and seqs is not None and cap is not None and seqs <= cap:
        return "client-concurrency-cap:seqs"  # the engine's cap is the client's: raise both
    return verdict


def remedy(kind: str, key: str) -> Remedy:
    """The entry for the key, else for its verdict alone (an engine without the finer split)."""
    table = TABLE.get(kind, {})
    return table.get(key) or table.get(key.split(":", 1)[0], Remedy(()))


def says(kind: str, key: str) -> str:
    """The next-step sentence of a verdict, before its numbers are filled in."""
    return remedy(kind, key).says


def family_kind(family: str, cpu_engine: bool = False) -> str:
    """The table a diagnosis reads, from what it knows: the metric names' family and whether
    the engine computes on this machine's CPUs (vLLM's CPU build has its own KV budget)."""
    if family == "llamacpp":
        return "llamacpp"
    return "vllm-cpu" if cpu_engine else "vllm"
