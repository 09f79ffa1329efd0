"""Cross-check on a real engine: servelab bench vs vllm bench serve.

Same server (the embedded vLLM CPU engine), same workload (random 128→128,
the same seed, the same concurrency), runs alternating between the two tools so
drift hits both alike. Prints each tool's output tok/s, mean TTFT and mean TPOT
over the repeats (mean, min–max) and whether the two ranges overlap.

Usage: .venv/bin/python bench/crosscheck_vllm.py [--repeats 3] [--num-prompts 32]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from servelab.engines import embedded_engine_spec, start_engine

VENV_BIN = Path(sys.executable).parent
METRICS = (("output_throughput", "output tok/s"), ("mean_ttft_ms", "mean TTFT (ms)"),
           ("mean_tpot_ms", "mean TPOT (ms)"))


def argv(tool: str, url: str, model: str, n: int, conc: int, out: Path, i: int) -> list[str]:
    common = ["--backend", "vllm", "--base-url", url, "--model", model, "--dataset-name", "random",
              "--random-input-len", "128", "--random-output-len", "128", "--num-prompts", str(n),
              "--max-concurrency", str(conc), "--seed", "0", "--temperature", "0", "--save-result",
              "--result-dir", str(out), "--result-filename", f"{tool}-{i}.json", "--disable-tqdm"]
    head = [str(VENV_BIN / "servelab"), "bench"] if tool == "servelab" else [str(VENV_BIN / "vllm"), "bench", "serve"]
    return head + common


def spread(values: list[float]) -> tuple[float, float, float]:
    return sum(values) / len(values), min(values), max(values)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--num-prompts", type=int, default=32)
    ap.add_argument("--max-concurrency", type=int, default=8)
    ap.add_argument("--port", type=int, default=8060)
    a = ap.parse_args()
    out = Path(tempfile.mkdtemp(prefix="crosscheck-"))
    runs: dict[str, list[dict]] = {"servelab": [], "vllm": []}
    with start_engine(embedded_engine_spec(port=a.port), out) as engine:
        for i in range(a.repeats):
            for tool in ("servelab", "vllm"):
                cmd = argv(tool, engine.base_url, engine.model, a.num_prompts, a.max_concurrency, out, i)
                subprocess.run(cmd, check=True, capture_output=True, text=True)
                runs[tool].append(json.loads((out / f"{tool}-{i}.json").read_text()))
                print(f"run {i} {tool}: " + ", ".join(f"{label} {runs[tool][-1][key]:.2f}"
                                                       for key, label in METRICS), flush=True)
    print(f"\n| metric | servelab mean (min–max) | vllm mean (min–max) | ranges overlap |")
    print("|---|---|---|---|")
    for key, label in METRICS:
        s, v = spread([r[key] for r in runs["servelab"]]), spread([r[key] for r in runs["vllm"]])
        overlap = s[1] <= v[2] and v[1] <= s[2]
        print(f"| {label} | {s[0]:.2f} ({s[1]:.2f}–{s[2]:.2f}) | {v[0]:.2f} ({v[1]:.2f}–{v[2]:.2f}) | "
              f"{'yes' if overlap else 'NO'} |")


if __name__ == "__main__":
    main()
