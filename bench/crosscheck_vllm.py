"""Cross-check on a real engine: servelab bench vs vllm bench serve.

Same server (the embedded vLLM CPU engine), same workload (random 128→128 or
ShareGPT, the same seed, the same concurrency), runs alternating between the two
tools so drift hits both alike. Prints, per workload, whether both tools sent the
same requests (total_input_tokens and completed equal in every repeat: the same
prompts for the same seed, prompt tokens counted the same way), then each tool's
output tok/s, mean TTFT and mean TPOT over the repeats (mean, min–max) and whether
the two ranges overlap.

Usage: .venv/bin/python bench/crosscheck_vllm.py [--repeats 3] [--num-prompts 32] [--datasets random,sharegpt]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from servelab.datasets.files import load_json_list
from servelab.datasets.tokenizer import bundled_sharegpt_path
from servelab.engines import embedded_engine_spec, start_engine

VENV_BIN = Path(sys.executable).parent
METRICS = (("output_throughput", "output tok/s"), ("mean_ttft_ms", "mean TTFT (ms)"),
           ("mean_tpot_ms", "mean TPOT (ms)"))


COUNTS = ("completed", "total_input_tokens")
DATASETS = {
    "random": ["--dataset-name", "random", "--random-input-len", "128", "--random-output-len", "128"],
    # ShareGPT's own output lengths, capped so a run stays short on 2 cores
    "sharegpt": ["--dataset-name", "sharegpt", "--sharegpt-output-len", "64"],
}


def argv(tool: str, url: str, model: str, n: int, conc: int, out: Path, name: str, dataset: list[str],
         ) -> list[str]:
    common = ["--backend", "vllm", "--base-url", url, "--model", model, *dataset, "--num-prompts", str(n),
              "--max-concurrency", str(conc), "--seed", "0", "--temperature", "0", "--save-result",
              "--result-dir", str(out), "--result-filename", f"{name}.json", "--disable-tqdm"]
    head = [str(VENV_BIN / "servelab"), "bench"] if tool == "servelab" else [str(VENV_BIN / "vllm"), "bench", "serve"]
    return head + common


def spread(values: list[float]) -> tuple[float, float, float]:
    return sum(values) / len(values), min(values), max(values)


def whole_sharegpt(out: Path) -> Path:
    """The bundled ShareGPT copy ends mid-record: servelab drops the torn tail, vLLM's
    json.load refuses the file. Both tools get the whole records, rewritten as valid JSON."""
    path = out / "sharegpt.json"
    path.write_text(json.dumps(load_json_list(bundled_sharegpt_path())))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--num-prompts", type=int, default=32)
    ap.add_argument("--max-concurrency", type=int, default=8)
    ap.add_argument("--port", type=int, default=8060)
    ap.add_argument("--datasets", default="random,sharegpt", help="comma list of " + ", ".join(DATASETS))
    a = ap.parse_args()
    out = Path(tempfile.mkdtemp(prefix="crosscheck-"))
    DATASETS["sharegpt"] += ["--dataset-path", str(whole_sharegpt(out))]
    with start_engine(embedded_engine_spec(port=a.port), out) as engine:
        for name in a.datasets.split(","):
            runs = measure(engine, a, out, name)
            report(name, runs)


def measure(engine, a, out: Path, name: str) -> dict[str, list[dict]]:
    runs: dict[str, list[dict]] = {"servelab": [], "vllm": []}
    # One unrecorded run first: a fresh engine's first requests are slow (seen: 135 vs 230
    # tok/s), which would land on whichever tool goes first.
    warm = argv("vllm", engine.base_url, engine.model, a.num_prompts, a.max_concurrency, out, f"{name}-warm",
                DATASETS[name])
    subprocess.run(warm, capture_output=True, text=True, check=False)
    for i in range(a.repeats):
        for tool in ("servelab", "vllm"):
            label = f"{name}-{tool}-{i}"
            cmd = argv(tool, engine.base_url, engine.model, a.num_prompts, a.max_concurrency, out, label,
                       DATASETS[name])
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                sys.exit(f"{label} failed ({done.returncode}): {(done.stderr or done.stdout)[-2000:]}")
            runs[tool].append(json.loads((out / f"{label}.json").read_text()))
            print(f"{name} run {i} {tool}: " + ", ".join(
                f"{key} {runs[tool][-1][key]}" for key in COUNTS) + ", " + ", ".join(
                f"{label} {runs[tool][-1][key]:.2f}" for key, label in METRICS), flush=True)
    return runs


def report(name: str, runs: dict[str, list[dict]]) -> None:
    print(f"\n{name}: same requests (completed, total_input_tokens equal in every repeat): "
          f"{'yes' if all(s[k] == v[k] for s, v in zip(runs['servelab'], runs['vllm']) for k in COUNTS) else 'NO'}"
          f" — servelab {[tuple(r[k] for k in COUNTS) for r in runs['servelab']]}, "
          f"vllm {[tuple(r[k] for k in COUNTS) for r in runs['vllm']]}")
    print("| metric | servelab mean (min–max) | vllm mean (min–max) | ranges overlap |")
    print("|---|---|---|---|")
    for key, label in METRICS:
        s, v = spread([r[key] for r in runs["servelab"]]), spread([r[key] for r in runs["vllm"]])
        overlap = s[1] <= v[2] and v[1] <= s[2]
        print(f"| {label} | {s[0]:.2f} ({s[1]:.2f}–{s[2]:.2f}) | {v[0]:.2f} ({v[1]:.2f}–{v[2]:.2f}) | "
              f"{'yes' if overlap else 'NO'} |")


if __name__ == "__main__":
    main()
