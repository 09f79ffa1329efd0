"""How far `servelab plan` and the simulated engine are from what published vLLM runs measured.

A build step: its output is committed and `servelab plan` reads it. Replays every row of the corpus
(src/servelab/planner/corpus/*.toml) through the planner, and writes
  docs/planner_accuracy.md                   per row predicted vs measured, median/p90/worst per
                                             metric, fit vs held-out, the misses and why
  src/servelab/planner/data/bands.json       the error band per metric the planner prints
With --fit it first refits the speed constants on the fit rows only (corpus.rows.fit_rows refuses
held-out rows) and writes them into src/servelab/planner/data/fitted.json (a few minutes: the rows
under load are simulated for every point of fit_load's grid); --fit-memory refits the non-KV memory
factors too (kept at the first fit's since a refit on later rows was tried and made them worse:
docs/planner.md). --check regenerates in memory and fails if the committed files differ (the table in
docs/ is reproducible from the corpus): a CI step, a few seconds.

Usage: .venv/bin/python tools/plan_accuracy.py [--fit] [--fit-memory] [--check]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path

from servelab.planner import bands, nonkv, speed_model
from servelab.planner.corpus.rows import Corpus, load_corpus
from servelab.planner.corpus.fit import outside_scope
from servelab.planner.corpus.replay import Compared, replay_memory, replay_speed, row_model

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "planner_accuracy.md"
METRICS = {"kv_tokens": "KV tokens (from the log's KV GiB)", "kv_gib": "KV GiB (whole budget, log's weights)",
           "other_gib": "non-KV memory beside weights", "weights_gib": "weights per GPU (from the shape)",
           "kv_needed_gib": "KV GiB one request needs", "mean_tpot_ms": "mean TPOT", "mean_ttft_ms": "mean TTFT",
           "output_tok_s": "output tok/s"}
SPEED_METRICS = ("mean_tpot_ms", "mean_ttft_ms", "output_tok_s")
# Why the largest misses miss (written by hand after reading the rows; the script checks the ids exist).
REASONS = {
    "vllm13061-r1qwen14b-2x4090-tp2": "TP 2: the log prints rank 0's KV GiB, vLLM sizes the pool by the smallest "
                                      "rank's (the engine reported 81,536 tokens = 7.46 GiB), which the planner "
                                      "cannot know",
    "vllm10511-llama3-8b-h100-tp1": "that PR's development branch counted 1.79 GiB (3.58 GiB at TP 2) as non-torch "
                                    "memory, 5-30x what released V0 builds logged on other GPUs",
    "vllm10511-llama3-8b-h100-tp2": "as above; with TP 2 the non-torch share (NCCL) doubled",
    "vllm13882-qwen25-7b-4bit-4060": "a 4-bit checkpoint: its kernels' dequantization buffers add to the profile "
                                     "peak (1.42 GiB at 4,096 tokens), which the bf16-fitted factors do not model",
    "oracle-llama8b-a10-131k": "a 0.27 GiB non-KV measurement: a 0.2 GiB model error is large relative to it, "
                               "small against the 4.6 GiB KV cache",
    "vllm6746-llama405b-fp8-8xh100": "Meta's FP8 checkpoint keeps attention and the first/last layers in bf16; "
                                     "the generic fp8 rule quantizes every linear layer",
    "vllm20469-qwen3-14b-awq-a100-16k": "--enforce-eager (no CUDA graphs: every kernel launched from Python): no "
                                        "fit row is eager, so the constants have no term for it; the AWQ "
                                        "kernel's compute factor (fitted under load) adds to the prefill, not "
                                        "to a decode step of one request, which is a weight read",
    "vllm14447-dsr1-awq-3090-tp16": "DeepSeek-R1 AWQ (MLA, 256 experts) split 16 ways: the profile peak per rank "
                                    "(0.37 GiB) is more than the dense-fitted factors give (the Marlin MoE kernel's "
                                    "workspace and MLA's buffers are the likely rest); 0.24 GiB short is +14.6% on "
                                    "its 1.57 GiB KV cache",
    "vllm17327-qwen3-30b-a3b-w4a16-3090": "an int4 MoE under V0's chunked default: the factors, fitted on dense "
                                          "bf16 FFNs, count 48 layers of 768-wide experts as if dense; 0.11 GiB "
                                          "over a 0.18 GiB peak, -2.1% on KV",
    "tt340a-128-128-c1": "a 1.7B model: the step is mostly fixed overhead, fitted as one value for all GPUs; "
                         "the same author's Qwen3-0.6B on an A100 that day (4.2 ms, not a corpus row) is "
                         "predicted 12.5-15.5% fast, and no overhead + bytes / bandwidth holds the 0.6B, the "
                         "1.7B and the 14B within 12.8% (bench/host_floor.py)",
    "tt340c-128-128-c1": "Qwen3-30B-A3B, a mixture of experts: decode within 2% with the fused-MoE kernels' "
                         "constants from vLLM's kernel series (speed_model.MOE_KERNEL_SERIES; -15% without them); "
                         "a 128-token prefill reads every expert its tokens pick (all 128 under uniform routing: "
                         "58 GB), where the measured 35.7 ms would need 80% of the datasheet bandwidth, so TTFT "
                         "is predicted 22% high; the 128 -> 1,024 row's 27.0 ms, below this one's, is likely "
                         "prefix-cache hits",
    "tt356-128-128-c1": "8-GPU tensor parallel (DeepSeek-R1-0528-AWQ on 8xH100): shown, not fitted: the "
                        "measured 16 ms step is 5x the weight read; the per-layer all-reduce the step model "
                        "lacks (corpus.fit.outside_scope) is most of it",
    "gpustack-q3-32b-h100-128-4-cinf": "1,000 chat requests of 128 tokens asking for 4: the measured 33 s (121.7 "
                                       "output tok/s) is the API server's work, about 30 ms a request (chat "
                                       "template, tokenizing, 1,000 open streams) done one at a time; the simulator "
                                       "holds each request back by the per-request cost fitted at concurrency 1 "
                                       "(3.5 ms) but does not queue requests behind one another in the API server",
    "gpustack-q3-32b-a100-32000-100-cinf": "the KV cache boundary: the planner gives 40,272 tokens, room for one "
                                           "32,077-token request, so the next one's 2,048-token prefill chunks ride "
                                           "in the running request's decode steps (vLLM V1 hands out blocks chunk by "
                                           "chunk); 40,272 is under Qwen3-32B's 40,960 default context, which vLLM "
                                           "refuses to start without, so the real cache was larger or "
                                           "--max-model-len shorter: the page does not say",
    "gpustackq-q3-8b-awq-4090-sharegpt-cinf": "a 1,000-request burst on a 24 GB card: TTFT is set by how many "
                                              "requests the KV cache admits at once (the planner gives 39,200 tokens "
                                              "for bf16, about 90 ShareGPT requests, 108,944 for AWQ); the measured "
                                              "15.4 s (bf16) and 7.9 s (AWQ) mean TTFT imply far more admitted at "
                                              "once, and the page prints neither its KV cache nor which throughput "
                                              "its tok/s is, so the gap cannot be split between memory and "
                                              "scheduler; the AWQ/bf16 TPOT ratio is within 10.2 %",
}


def compare_all(corpus: Corpus) -> list[tuple[Compared, bool]]:
    """Every comparison with whether its row is held out."""
    mem, speed = nonkv.fitted_constants(), speed_model.fitted_speed()
    out = [(c, corpus.held_out(r)) for r in corpus.memory for c in replay_memory(r, mem)]
    return out + [(_scoped(c, r), corpus.held_out(r)) for r in corpus.speed for c in replay_speed(r, speed)]


def _scoped(compared: Compared, row) -> Compared:
    """A row the step model cannot represent is shown with the reason, neither fitted nor summarised."""
    why = outside_scope(row)
    return replace(compared, excluded=why) if why and not compared.excluded else compared


def summary(rows: list[Compared]) -> dict | None:
    kept = [c for c in rows if not c.excluded]
    if not kept:
        return None
    errors = sorted(abs(c.error) for c in kept)
    worst = max(kept, key=lambda c: abs(c.error))
    p90 = errors[min(len(errors) - 1, round(0.9 * (len(errors) - 1)))]
    return {"n": len(kept), "median": statistics.median(errors), "p90": p90, "worst": abs(worst.error),
            "worst_row": worst.row_id}


def band_data(compared: list[tuple[Compared, bool]], loaded: frozenset[str] = frozenset(),
              setups: dict[str, tuple[str, str]] | None = None) -> dict:
    """Per metric: the held-out rows' errors where there are enough of them, else all rows'; a speed
    metric also as ``METRIC@concurrency-1`` (what ``servelab plan`` prints for one request alone) and
    ``METRIC@under-load`` (the simulated engine under a batch), from those rows alone; and as
    ``METRIC@<setup>`` (``speed_model.SETUPS``) from the rows of that setup (``setups``: row id -> its
    setup and the reason it is outside the fit's scope, if it is), with the signed median."""
    out = _setup_bands(compared, setups or {})
    for metric in METRICS:
        subsets = [(metric, lambda c: True)]
        if metric in SPEED_METRICS and loaded:
            subsets += [(metric + bands.ALONE, lambda c: c.row_id not in loaded),
                        (metric + bands.UNDER_LOAD, lambda c: c.row_id in loaded)]
        for name, keep in subsets:
            held = [c for c, h in compared if h and c.metric == metric and keep(c)]
            every = [c for c, _ in compared if c.metric == metric and keep(c)]
            basis, rows = ("held-out", held) if len([c for c in held if not c.excluded]) >= bands.MIN_HELD_OUT \
                else ("all rows", every)
            s = summary(rows)
            if s:
                out[name] = {"median": round(s["median"], 4), "p90": round(s["p90"], 4),
                             "worst": round(s["worst"], 4), "rows": s["n"], "basis": basis}
    return out


def _setup_bands(compared: list[tuple[Compared, bool]], setups: dict[str, tuple[str, str]]) -> dict:
    """Each speed metric's band over the rows of one of ``speed_model.SETUPS``: the rows the step model has
    no term for, shown though outside the fit's scope; "not fitted" when none of them was a fit row."""
    out = {}
    for setup in speed_model.SETUPS:
        for metric in SPEED_METRICS:
            rows = [(c, held) for c, held in compared if c.metric == metric and setups.get(c.row_id, ("",))[0] == setup
                    and (not c.excluded or c.excluded == setups[c.row_id][1])]
            if not rows:
                continue
            errors = [c.error for c, _ in rows]
            s = summary([replace(c, excluded="") for c, _ in rows])
            fitted = any(not held and not setups[c.row_id][1] for c, held in rows)
            out[metric + setup] = {"median": round(s["median"], 4), "p90": round(s["p90"], 4),
                                   "worst": round(s["worst"], 4), "rows": s["n"],
                                   "basis": "all rows" if fitted else "not fitted",
                                   "bias": round(statistics.median(errors), 4)}
    return out


def setup_table(data: dict) -> list[str]:
    lines = ["| setup | metric | rows | signed median | p90 (absolute) | rows fitted |", "|---|---|---|---|---|---|"]
    for setup, what in speed_model.SETUPS.items():
        for metric in SPEED_METRICS:
            band = data.get(metric + setup)
            if band:
                lines.append(f"| {what.split(':')[0]} | `{metric}` | {band['rows']} | {_pct(band['bias'])} | "
                             f"{band['p90']:.1%} | {'some' if band['basis'] == 'all rows' else 'none'} |")
    return lines


def setups_of(corpus: Corpus) -> dict[str, tuple[str, str]]:
    """Speed row id -> its setup among ``speed_model.SETUPS`` and why it is outside the fit's scope ("" if
    it is inside); rows of no such setup are left out."""
    out = {}
    for row in corpus.speed:
        setup = speed_model.setup_class(row_model(row), row.tensor_parallel, row.enforce_eager)
        if setup:
            out[row.id] = (setup, outside_scope(row))
    return out


def ratio_lines(compared: list[tuple[Compared, bool]], corpus: Corpus) -> list[str]:
    """Two configurations of one model on one GPU: is predicted/predicted close to measured/measured?"""
    lines = []
    for metric, left, right, what in RATIO_PAIRS:
        a = _find(compared, left, metric)
        b = _find(compared, right, metric)
        if a and b:
            predicted, measured = a.predicted / b.predicted, a.measured / b.measured
            lines.append(f"| {what} | {metric} | {measured:.3f} | {predicted:.3f} | {_pct(predicted / measured - 1)} |")
    return lines


RATIO_PAIRS = [
    ("kv_gib", "vllm10517-llama8b-3090-20k", "vllm10517-llama8b-3090-29k",
     "Llama-3.1-8B, RTX 3090: --max-model-len 20000 vs 29000"),
    ("other_gib", "vllm10511-llama3-8b-h100-tp1", "vllm10511-llama3-8b-h100-tp2", "Llama-3-8B, H100: TP 1 vs TP 2"),
    ("kv_tokens", "recipes12-qwen3coder480b-fp8-h20-095", "recipes12-qwen3coder480b-fp8-h20-default",
     "Qwen3-Coder-480B-FP8, H20: --gpu-memory-utilization 0.95 vs default"),
    ("mean_tpot_ms", "vllm20469-qwen3-14b-awq-a100-16k", "tt340b-128-128-c1",
     "Qwen3-14B, A100: AWQ (eager, 16k prompt) vs bf16 (128 prompt)"),
    ("mean_tpot_ms", "tt143-4096-128-c1", "tt143-128-128-c1", "Qwen2.5-72B, 2xH100: 4,096 vs 128-token prompt"),
    ("mean_tpot_ms", "tt394-4096-128-c1", "tt394-128-128-c1", "Qwen3-4B, RTX 4090: 4,096 vs 128-token prompt"),
    ("mean_ttft_ms", "tt143-3072-128-c1", "tt143-1024-128-c1", "Qwen2.5-72B, 2xH100: TTFT 3,072 vs 1,024 tokens"),
    # gpustack's lab: one source, one GPU, the same 1,000 ShareGPT requests at once, bf16 vs a quantized checkpoint.
    *((metric, f"gpustack-q3-{size}-a100-sharegpt-{fmt}-cinf", f"gpustack-q3-{size}-a100-sharegpt-cinf",
       f"Qwen3-{size.upper()}, A100, ShareGPT x 1,000 at once: {fmt.upper()} vs bf16 ({split})")
      for size, split in (("14b", "held out"), ("32b", "fit group")) for fmt in ("awq", "fp8")
      for metric in ("mean_tpot_ms", "output_tok_s")),
    *(("mean_tpot_ms", f"gpustackq-q3-8b-{fmt}-{gpu}-sharegpt-cinf", f"gpustackq-q3-8b-bf16-{gpu}-sharegpt-cinf",
       f"Qwen3-8B, {name}, ShareGPT x 1,000 at once: {fmt.upper()} vs bf16 ({split})")
      for gpu, name, split, formats in (("4090", "RTX 4090", "held out", ("awq",)),
                                        ("a100", "A100", "fit group", ("awq", "gptq")),
                                        ("h100", "H100", "fit group", ("fp8", "awq")))
      for fmt in formats),
]


def _find(compared, row_id: str, metric: str) -> Compared | None:
    return next((c for c, _ in compared if c.row_id == row_id and c.metric == metric), None)


def _pct(x: float) -> str:
    return f"{x:+.1%}"


def summary_table(compared: list[tuple[Compared, bool]], loaded: frozenset[str] = frozenset()) -> list[str]:
    """Every metric over its rows; a speed metric again over the rows at concurrency 1 and those under
    load (``loaded``: a higher concurrency or a burst), which the simulated engine replays."""
    lines = ["| metric | rows | fit: n, median, p90, worst | held-out: n, median, p90, worst (row) |",
             "|---|---|---|---|"]
    for metric, label in METRICS.items():
        parts = [(label, lambda c: True)]
        if metric in SPEED_METRICS and loaded:
            parts += [(f"{label}, concurrency 1", lambda c: c.row_id not in loaded),
                      (f"{label}, under load", lambda c: c.row_id in loaded)]
        for name, keep in parts:
            fit = summary([c for c, h in compared if not h and c.metric == metric and keep(c)])
            held = summary([c for c, h in compared if h and c.metric == metric and keep(c)])
            if fit or held:
                lines.append(f"| {name} | `{metric}` | {_cell(fit)} | {_cell(held, with_row=True)} |")
    return lines


def under_load(corpus: Corpus) -> frozenset[str]:
    return frozenset(r.id for r in corpus.speed if r.workload.under_load)


def _cell(s: dict | None, with_row: bool = False) -> str:
    if not s:
        return "-"
    row = f" ({s['worst_row']})" if with_row else ""
    return f"{s['n']}, {s['median']:.1%}, {s['p90']:.1%}, {s['worst']:.1%}{row}"


def row_table(compared: list[tuple[Compared, bool]], corpus: Corpus, speed: bool) -> list[str]:
    ids = {r.id: r for r in (corpus.speed if speed else corpus.memory)}
    lines = ["| row | split | metric | predicted | measured | error | source |", "|---|---|---|---|---|---|---|"]
    for c, held in compared:
        row = ids.get(c.row_id)
        if row is None:
            continue
        error = f"({_pct(c.error)}) excluded: {c.excluded}" if c.excluded else _pct(c.error)
        lines.append(f"| {c.row_id} | {'held-out' if held else 'fit'} | {c.metric} | {c.predicted:,.3f} | "
                     f"{c.measured:,.3f} | {error} | [{_short(row.source.url)}]({_link(row.source.url)}) |")
    return lines


def _short(url: str) -> str:
    return url.removeprefix("https://github.com/").removeprefix("servelab:")


def _link(url: str) -> str:
    return url if url.startswith("https://") else "../" + url.removeprefix("servelab:").split(" ")[0]


def document(corpus: Corpus, compared: list[tuple[Compared, bool]]) -> str:
    mem, speed = nonkv.fitted_constants(), speed_model.fitted_speed()
    held = sorted(corpus.held_out_ids)
    parts = [
        "# Planner accuracy against published vLLM runs", "",
        "Generated by `tools/plan_accuracy.py` from `src/servelab/planner/corpus/` — do not edit by hand; "
        "rerun it. Errors are (predicted − measured) / |measured|; summaries use absolute errors.", "",
        f"Corpus: {len(corpus.memory)} startup-memory rows, {len(corpus.speed)} speed rows. "
        f"Held out ({len(held)} rows, never fitted): every third (model, GPU) group by earliest source "
        "date (`planner/corpus/rows.py`).", "",
        "## Constants", "",
        f"- non-KV memory ({mem.source}): FFN factor {mem.ffn_factor}, hidden factor {mem.hidden_factor} "
        f"bytes per token, {mem.sampler_copies} fp32 logit copies per request, non-torch {mem.non_torch_gib} GiB "
        f"(TP>1: {mem.non_torch_tp_gib} GiB), CUDA graphs {mem.cuda_graph_gib} GiB (not fitted: no row logs it)",
        f"- speed ({speed.source}): step overhead {speed.overhead_s * 1e3:.2f} ms, per-request "
        f"{speed.request_s * 1e3:.2f} ms, per running request per step {speed.per_seq_s * 1e6:.0f} µs, "
        f"weight-only kernels' compute x{speed.weight_only_compute}; " + "; ".join(
            f"{name}: bandwidth {eff.bw_eff:.0%} of peak, compute {eff.compute_eff:.0%} of peak"
            for name, eff in sorted(speed.families.items())), "",
        "## Summary", "", *summary_table(compared, under_load(corpus)), "",
        "## Setups no fit row calibrates", "",
        "`servelab plan` and simulated runs of such a setup print these bands, with the direction of the "
        "miss, instead of the general ones (`planner/speed_model.py`, `SETUPS`).", "",
        *setup_table(_setup_bands(compared, setups_of(corpus))), "",
        "## Ratios between two configurations of one model and GPU", "",
        "| pair | metric | measured ratio | predicted ratio | error |", "|---|---|---|---|---|",
        *ratio_lines(compared, corpus), "",
        "## Where it misses, and why", "",
        *[f"- `{row_id}`: {why}" for row_id, why in REASONS.items()], "",
        "## Memory rows", "", *row_table(compared, corpus, speed=False), "",
        "## Speed rows", "",
        "At concurrency 1 in closed form (`speed_model.concurrency1`); at a higher concurrency or a request "
        "rate through the simulated engine with the same step model (`corpus.replay.simulated`), against "
        "the planner's KV cache for the setup. Bandwidth, compute and the fixed costs are fitted on the "
        "concurrency-1 fit rows; the per-sequence cost and the weight-only kernels' factor on the fit rows "
        "under load (`corpus.fit.fit_load`).", "", *row_table(compared, corpus, speed=True), ""]
    return "\n".join(parts)


def write_fit(corpus: Corpus, memory: bool) -> None:
    from servelab.planner.corpus.fit import fit_load, fit_nonkv

    kept = json.loads(nonkv.FITTED.read_text(encoding="utf-8"))["nonkv"]
    data = {"split": "planner/corpus/rows.py held_out_ids, committed before this fit",
            "nonkv": fit_nonkv(corpus).to_dict() if memory else kept,
            "speed": fit_load(corpus).to_dict()}
    nonkv.FITTED.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {nonkv.FITTED.relative_to(ROOT)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--fit", action="store_true", help="refit the speed constants on the fit rows first")
    parser.add_argument("--fit-memory", action="store_true", help="with --fit, refit the non-KV memory factors too")
    parser.add_argument("--check", action="store_true", help="fail if the committed doc or bands differ")
    args = parser.parse_args(argv)
    if args.fit_memory and not args.fit:
        parser.error("--fit-memory refits with --fit: pass both")
    corpus = load_corpus()
    unknown = set(REASONS) - {r.id for r in corpus.memory + corpus.speed}
    if unknown:
        raise SystemExit(f"plan_accuracy: REASONS names rows the corpus lacks: {', '.join(sorted(unknown))}")
    if args.fit:
        write_fit(corpus, args.fit_memory)
        nonkv.fitted_constants.cache_clear()
        speed_model.fitted_speed.cache_clear()
    compared = compare_all(corpus)
    doc = document(corpus, compared)
    band_json = json.dumps(band_data(compared, under_load(corpus), setups_of(corpus)), indent=1) + "\n"
    if args.check:
        same = DOC.read_text(encoding="utf-8") == doc and bands.BANDS.read_text(encoding="utf-8") == band_json
        print("docs/planner_accuracy.md and bands.json are up to date" if same else "out of date: rerun")
        return 0 if same else 1
    DOC.write_text(doc, encoding="utf-8")
    bands.BANDS.write_text(band_json, encoding="utf-8")
    print(f"wrote {DOC.relative_to(ROOT)} and {bands.BANDS.relative_to(ROOT)}")
    print("\n".join(summary_table(compared, under_load(corpus))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
