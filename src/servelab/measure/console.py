"""What a bench prints around vLLM's block, in vLLM's words where vLLM prints it: the
preamble before the run, the failed requests and the block after it (with only the
metrics vLLM would show), and servelab's own notes and warnings."""

from __future__ import annotations

import math
import sys

from servelab.config import BenchSpec
from servelab.loadgen.values import BenchConfig
from servelab.measure import simulated
from servelab.metrics.console import console_block
from servelab.metrics.summary import Summary
from servelab.metrics.tally import Tally


def notes(spec: BenchSpec, config: BenchConfig) -> None:
    """Flags vLLM accepts and sends nothing for: said, not silently dropped."""
    if spec.request.use_beam_search:
        print("servelab: note: --use-beam-search has no effect (vllm bench serve 0.32 sends nothing for it "
              "either); pass --extra-body '{\"use_beam_search\": true}' to ask the server", file=sys.stderr)
    if spec.request.logprobs is not None and config.kind == "chat":
        print("servelab: note: --logprobs is not sent with --backend openai-chat (vllm bench serve 0.32 sends "
              "it with completions only)", file=sys.stderr)


def preamble(config: BenchConfig) -> None:
    if config.load.ready_check_timeout_s <= 0:
        print("Skipping endpoint ready check.")
    print("Starting main benchmark run...")
    load = config.load
    if load.probe_request_rate > 0:
        print(f"Probe request rate: {load.probe_request_rate} req/s")
    if load.ramp_up_strategy is not None:
        print(f"Traffic ramp-up strategy: {load.ramp_up_strategy}.")
        print(f"Will increase RPS from {load.ramp_up_start_rps} to {load.ramp_up_end_rps} RPS over the "
              "duration of the benchmark.")
    else:
        print(f"Traffic request rate: {load.request_rate}")
    dist = "Poisson process" if load.burstiness == 1.0 else "Gamma distribution"
    print(f"Burstiness factor: {load.burstiness} ({dist})")
    print(f"Maximum request concurrency: {load.max_concurrency}", flush=True)


def block(summary: Summary, tally: Tally, config: BenchConfig, shown: list[str], probes: dict | None,
          labels: dict) -> None:
    """After the run: its failed requests, the SIMULATED line if it was, vLLM's block."""
    print_failures(tally)
    if labels:
        print(simulated.banner(labels["simulated"]))
    print(console_block(summary, max_concurrency=config.load.max_concurrency,
                        request_rate=config.load.request_rate, selected=shown, probes=probes))


def multi_turn_units(spec: BenchSpec, summary: Summary, replay) -> None:
    """vLLM's block mixes two units in a multi-turn run (``replay``: its turns, None for any
    other): its configured rate and --num-prompts count conversations, while requests, req/s
    and the token rows count turns. Say which is which."""
    if replay is None:
        return
    rate = spec.load.request_rate
    paced = "all at once" if math.isinf(rate) else f"{rate:g} conversations/s configured"
    print(f"servelab: multi-turn: {spec.dataset.num_prompts} conversations ({paced}) → {summary.completed} "
          f"turns completed; 'Request rate configured' counts conversations, every request and req/s row turns")


def shown_metrics(selected: list[str], config: BenchConfig) -> list[str]:
    """vLLM shows queue metrics only when a concurrency cap exists (and the
    queue-inclusive E2EL only with a finite rate)."""
    shown, load = [], config.load
    for m in selected:
        if m == "client_queue_time" and load.max_concurrency is None:
            continue
        if m == "e2el_including_client_queue" and (load.max_concurrency is None
                                                   or math.isinf(load.request_rate)):
            continue
        shown.append(m)
    return shown


def print_failures(tally: Tally, limit: int = 5) -> None:
    failed = tally.failures()
    if not failed:
        return
    print(f"Failed requests during benchmark run detected (showing {min(limit, len(failed))} "
          f"of {len(failed)}):")
    for i, (request_id, error) in enumerate(failed[:limit]):
        print(f"Error {i} [{request_id}]: {error}")


def warnings(lines: list[str]) -> None:
    """Shards lost mid-run (a worker or a Ray node): the result is the others'."""
    for line in lines:
        print(f"servelab: WARNING {line}; results cover the other workers' records")
